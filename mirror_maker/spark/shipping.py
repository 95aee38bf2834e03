"""Which of the user's plugin modules the executors need a copy of, packed for ``addPyFile``.

A handler or listener given by dotted path is imported again inside every Spark task. Installed
packages (site-packages) are expected on the executors like confluent-kafka itself; a module
that only the driver has (a file in its working directory or on its PYTHONPATH) is shipped: a
single file as it is, a package directory as a zip. The driver has already imported the plugin
(``plugins.load_*``), so ``sys.modules`` says where it came from.
"""

from __future__ import annotations

import os
import sys
import sysconfig
import zipfile
from typing import Iterable, List, Optional

from ..errors import ConfigError


def _installed_roots() -> List[str]:
    paths = sysconfig.get_paths()
    roots = {paths[key] for key in ("stdlib", "platstdlib", "purelib", "platlib") if key in paths}
    return [os.path.realpath(root) for root in roots]


def _top_module(dotted_path: str) -> str:
    return dotted_path.split(":", 1)[0].split(".", 1)[0]


def _location(module) -> Optional[str]:
    """The file (a module) or directory (a package) a top-level module was loaded from."""
    file = getattr(module, "__file__", None)
    if file:
        return os.path.dirname(file) if os.path.basename(file) == "__init__.py" else file
    paths = list(getattr(module, "__path__", []) or [])  # a namespace package
    return paths[0] if len(paths) == 1 else None


def modules_to_ship(dotted_paths: Iterable[Optional[str]], modules=None) -> List[tuple]:
    """``(top-level name, path)`` of each plugin module that is not installed."""
    modules = sys.modules if modules is None else modules
    roots = _installed_roots()
    found = []
    for dotted in dotted_paths:
        if not dotted:
            continue
        name = _top_module(dotted)
        module = modules.get(name)
        if name == "mirror_maker" or module is None:
            continue
        location = _location(module)
        if location is None:
            continue
        real = os.path.realpath(location)
        if any(real == root or real.startswith(root + os.sep) for root in roots):
            continue
        if (name, location) not in found:
            found.append((name, location))
    return found


def pack(name: str, location: str, workdir: str) -> str:
    """A file ``addPyFile`` takes: the module file itself, or a zip of the package directory.

    Directories without ``__init__.py`` (namespace packages) get an empty one in the zip, so
    zipimport finds the modules below them.
    """
    if os.path.isfile(location):
        return location
    target = os.path.join(workdir, f"{name}.zip")
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as archive:
        for directory, subdirs, files in os.walk(location):
            subdirs[:] = [d for d in subdirs if d != "__pycache__" and not d.startswith(".")]
            relative = os.path.join(name, os.path.relpath(directory, location))
            relative = os.path.normpath(relative)
            if "__init__.py" not in files:
                archive.writestr(os.path.join(relative, "__init__.py"), "")
            for file in files:
                if file.endswith(".py"):
                    archive.write(os.path.join(directory, file), os.path.join(relative, file))
    return target


def check_py_files(paths: Iterable[str]) -> List[str]:
    """``--spark.py.files`` entries, each an existing .py, .zip or .egg file."""
    checked = []
    for path in paths:
        if not os.path.isfile(path):
            raise ConfigError(f"--spark.py.files: '{path}' is not a file")
        if not path.endswith((".py", ".zip", ".egg")):
            raise ConfigError(f"--spark.py.files: '{path}' is not a .py, .zip or .egg file")
        checked.append(os.path.abspath(path))
    return checked
