"""The documentation says what the code does: the tables made from the option spec are up to date,
every link and anchor resolves, every test it names exists, the packages import only what
docs/architecture.md allows, and every page is installed with the package."""

from __future__ import annotations

import ast
import configparser
import functools
import re
from pathlib import Path
from typing import Dict, Iterator, List, Set, Tuple

import pytest

from mirror_maker.cli import reference

ROOT = Path(__file__).resolve().parents[2]
DOCS = sorted((ROOT / "docs").glob("*.md"))
PAGES = [ROOT / "README.md", ROOT / "CHANGELOG.md", ROOT / "benchmarks" / "results" / "history.md", *DOCS]


def _ids(paths: List[Path]) -> List[str]:
    return [str(p.relative_to(ROOT)) for p in paths]


def test_configuration_md_is_made_from_the_spec():
    path = ROOT / "docs" / "configuration.md"
    text = path.read_text()
    assert text.count("<!-- generated: ") == len(reference.BLOCKS)
    assert reference.render(text) == text, \
        "docs/configuration.md differs from the option spec: run python -m mirror_maker.cli.reference docs/configuration.md"


def _without_code_blocks(text: str) -> str:
    return re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)


@functools.lru_cache(maxsize=None)
def slugs(path: Path) -> Set[str]:
    """GitHub's anchors of a Markdown file's headings."""
    seen: Dict[str, int] = {}
    anchors = set()
    for line in _without_code_blocks(path.read_text()).splitlines():
        heading = re.match(r"#{1,6}\s+(.*)", line)
        if not heading:
            continue
        slug = re.sub(r"[^\w\- ]", "", heading.group(1).strip().lower()).replace(" ", "-")
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        anchors.add(slug if count == 0 else f"{slug}-{count}")
    return anchors


def links(path: Path) -> Iterator[str]:
    for match in re.finditer(r"!?\[[^\]]*\]\(([^)\s]+)\)", _without_code_blocks(path.read_text())):
        yield match.group(1)


@pytest.mark.parametrize("page", PAGES, ids=_ids(PAGES))
def test_every_link_and_anchor_resolves(page):
    for target in links(page):
        if re.match(r"[a-z]+:", target):
            continue
        file, _, anchor = target.partition("#")
        resolved = (page.parent / file).resolve() if file else page
        assert resolved.exists(), f"{page.name}: {target} does not exist"
        if anchor:
            assert anchor in slugs(resolved), f"{page.name}: {target}: no heading with that anchor"


@functools.lru_cache(maxsize=None)
def _test_names() -> Dict[str, Set[str]]:
    """Test file name -> the names of the functions its files define (unit and integration)."""
    names: Dict[str, Set[str]] = {}
    for path in (ROOT / "tests").rglob("test_*.py"):
        tree = ast.parse(path.read_text())
        defined = {node.name for node in ast.walk(tree) if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))}
        for key in (path.name, str(path.relative_to(ROOT))):
            names.setdefault(key, set()).update(defined)
    return names


def named_tests(page: Path) -> Iterator[Tuple[str, str]]:
    """(file, test) for every ``test_x.py::test_y`` a page names in code spans, ``::test_z`` after
    it meaning the same file; (file, "") for a file alone."""
    current = None
    for span in re.findall(r"`([^`\n]+)`", page.read_text()):
        whole = re.fullmatch(r"((?:tests/(?:unit|integration)/)?test_\w+\.py)(?:::(\w+)(?:\[[^\]]*\])?)?", span)
        if whole:
            current = whole.group(1)
            yield current, whole.group(2) or ""
            continue
        more = re.fullmatch(r"::(\w+)(?:\[[^\]]*\])?", span)
        if more and current:
            yield current, more.group(1)


@pytest.mark.parametrize("page", PAGES, ids=_ids(PAGES))
def test_every_test_a_page_names_exists(page):
    names = _test_names()
    for file, test in named_tests(page):
        assert file in names, f"{page.name} names {file}, which does not exist"
        assert not test or test in names[file], f"{page.name} names {file}::{test}, which does not exist"


def _allowed_imports() -> Dict[str, Set[str]]:
    """docs/architecture.md's table: each package (or top-level module) -> what it may import."""
    allowed = {}
    for line in (ROOT / "docs" / "architecture.md").read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 3 or not cells[0].startswith("`"):
            continue
        may = {"*"} if cells[2] == "everything" else set(re.findall(r"`([\w.]+)`", cells[2]))
        for unit in re.findall(r"`(\w+)`", cells[0]):
            allowed[unit] = may
    return allowed


def _imports() -> Iterator[Tuple[str, str, str]]:
    """(module path, its package or top-level module, what it imports from another: ``pkg.module``)."""
    package = ROOT / "mirror_maker"
    for path in package.rglob("*.py"):
        parts = path.relative_to(package).parts
        unit = parts[0] if len(parts) > 1 else path.stem
        here = list(parts[:-1])
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level > 0:
                base = here[:len(here) - (node.level - 1)]
                target = base + [m for m in (node.module or "").split(".") if m]
                targets = [target + [alias.name] for alias in node.names] if len(target) < 2 else [target]
            elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("mirror_maker."):
                targets = [node.module.split(".")[1:]]
            else:
                continue
            for t in targets:
                if t[0] != unit and t[0] not in ("__init__", "__version__"):
                    yield str(path.relative_to(ROOT)), unit, ".".join(t[:2])


def test_packages_import_only_what_architecture_md_allows():
    allowed = _allowed_imports()
    for where, unit, imported in _imports():
        if unit in ("__init__", "__main__"):
            continue
        assert unit in allowed, f"docs/architecture.md has no row for {unit}"
        may = allowed[unit]
        assert "*" in may or imported.split(".")[0] in may or imported in may, \
            f"{where} imports {imported}, which docs/architecture.md does not allow {unit}"


def test_every_page_of_docs_is_installed_with_the_package():
    setup = configparser.ConfigParser()
    setup.read(ROOT / "setup.cfg")
    installed = setup["options.data_files"]["share/doc/kafka-mirror-maker/docs"].split()
    assert sorted(installed) == [str(p.relative_to(ROOT)) for p in DOCS]


def test_the_readme_is_a_first_page():
    assert len((ROOT / "README.md").read_text().splitlines()) <= 300
