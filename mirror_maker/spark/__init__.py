"""``--spark``: the mirror's streams as Spark tasks. Importing this package does not import pyspark;
``driver.import_pyspark`` does, only when ``--spark`` is given."""
