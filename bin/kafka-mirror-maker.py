#!/usr/bin/env python3
"""kafka-mirror-maker.sh for Python: same flags, same properties files, same exit codes."""
import os
import sys

# From a checkout, run the package next to this script; when installed, the installed one.
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.realpath(__file__))))

from mirror_maker.cli import main  # noqa: E402

main()
