"""MirrorMaker 2's dedicated mode: one mm2.properties naming the clusters and the flows between
them, every enabled flow run in one process by the engine of the MirrorMaker v1 command line.

``mm2_file`` reads the file with MirrorMaker 2's scopes and precedence, each setting as
``config.spec`` declares it, ``flows`` turns it into one ``MirrorMakerConfig`` per pair of clusters,
``election`` picks the one node that runs a flow's syncs, checkpoints and heartbeats, ``takeover``
resumes where Kafka's MirrorMaker 2 stopped, ``supervisor`` runs the flows (restarts, signals, exit
status, status lines), ``on_spark`` runs their streams as Spark tasks (``--spark``) and ``metrics``
serves ours and MirrorMaker 2's metric names. May import everything but ``cli``
(``cli.exit_codes`` only); ``cli.dedicated`` is its command line.
"""
