"""The public API is ``from mirror_maker import ...`` (as httpx tests its exported members), and the
subpackages import only what their docstrings allow."""

import ast
import importlib
import pkgutil
import types
from pathlib import Path

import mirror_maker

PUBLIC = {"ConsumerRecord", "MessageHandler", "ProducerRecord", "RawBatch", "RawBatchHandler",
          "RebalanceListener", "TopicPartition", "__version__"}


def test_all_is_the_plugin_api():
    assert set(mirror_maker.__all__) == PUBLIC
    assert sorted(mirror_maker.__all__) == mirror_maker.__all__


def test_every_name_in_all_is_importable():
    namespace = {}
    exec("from mirror_maker import *", namespace)  # noqa: S102
    assert PUBLIC <= set(namespace)


def test_every_public_non_module_attribute_is_in_all():
    exported = {name for name in dir(mirror_maker)
                if not name.startswith("_") and not isinstance(getattr(mirror_maker, name), types.ModuleType)}
    assert exported == PUBLIC - {"__version__"}


def test_paths_the_readme_names_keep_working():
    from mirror_maker.handlers import PartitionPreservingHandler

    from mirror_maker.cli import main

    assert PartitionPreservingHandler.keep_partition is True
    assert callable(main)
    assert pkgutil.resolve_name("mirror_maker.handlers.PartitionPreservingHandler") is PartitionPreservingHandler


#: What each subpackage may import from the rest of the package (its docstring says why).
API_LEVEL = {"errors", "records", "handlers", "listeners", "plugins", "extras"}
ALLOWED = {
    "config": {"errors", "redaction", "extras"},
    "ops": {"callbacks", "errors", "records", "redaction"},
    "clients": {"callbacks", "errors", "records", "ops", "engine.state"},
    "offsets": {"callbacks", "errors", "records", "clients", "engine.state", "ops"},
    "engine": API_LEVEL | {"callbacks", "config", "clients", "offsets", "ops", "cli.exit_codes", "shallow",
                           "replication"},
    "replication": {"callbacks", "errors", "records", "plugins", "clients", "ops", "config"},
    "spark": API_LEVEL | {"config", "engine", "ops", "cli.exit_codes"},
    "shallow": API_LEVEL | {"engine", "clients", "ops"},
}


def _imports(path: Path, package: str):
    """What ``path`` imports from the package, as dotted names below ``mirror_maker``: for
    ``from X import y``, ``X.y`` (y may be a submodule; X.y allowed means X.y is meant)."""
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level:
            base = package.split(".")[: len(package.split(".")) - node.level + 1]
            module = ".".join(base[1:] + ([node.module] if node.module else []))
            for alias in node.names:
                yield f"{module}.{alias.name}".strip(".")


def test_subpackages_import_only_what_they_may():
    root = Path(mirror_maker.__file__).parent
    problems = []
    for sub, allowed in ALLOWED.items():
        for path in (root / sub).glob("*.py"):
            for name in _imports(path, f"mirror_maker.{sub}"):
                if name.split(".")[0] in ("", sub):
                    continue
                if not any(name == a or name.startswith(a + ".") for a in allowed):
                    problems.append(f"{sub}/{path.name} imports {name}")
    assert not problems, problems


def test_every_module_imports():
    for info in pkgutil.walk_packages(mirror_maker.__path__, "mirror_maker."):
        if info.name in ("mirror_maker.__main__",):
            continue
        importlib.import_module(info.name)
