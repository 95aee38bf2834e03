"""Source offsets: the flush-then-commit rule (``checkpoint``) and where offsets go (``committer``).

``checkpoint.Checkpoint`` is the only place a commit is decided: the shared producer is flushed
first, and only what the target acknowledged is committed. ``committer.OffsetCommitter`` commits to
the source group (MirrorMaker v1); it is the seam an exactly-once mode replaces. May import
``clients``, ``engine.state``, ``records`` and ``errors``.
"""
