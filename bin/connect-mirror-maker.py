#!/usr/bin/env python3
"""connect-mirror-maker.sh for Python: MirrorMaker 2's dedicated mode, mm2.properties and all."""
import os
import sys

# From a checkout, run the package next to this script; when installed, the installed one.
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.realpath(__file__))))

from mirror_maker.cli.dedicated import main  # noqa: E402

main()
