"""MirrorMaker 2's dedicated mode: one mm2.properties naming the clusters and the flows between
them, every enabled flow run in one process by the engine of the MirrorMaker v1 command line.

``spec`` declares every setting the file may hold (name, type, default, scopes, doc), ``mm2_file``
reads the file with MirrorMaker 2's scopes and precedence, ``flows`` turns it into one
``MirrorMakerConfig`` per pair of clusters, ``election`` picks the one node that runs a flow's
syncs, checkpoints and heartbeats, ``supervisor`` runs the flows (restarts, signals, exit status,
status lines) and ``metrics`` serves ours and MirrorMaker 2's metric names. May import
everything but ``cli``; ``cli.dedicated`` is its command line.
"""
