"""``--spark``: the mirror's streams as Spark tasks. Importing this package does not import pyspark;
``context.import_pyspark`` does, only when ``--spark`` is given."""
