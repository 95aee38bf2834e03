"""The distribution a user installs: ``python -m build`` makes the sdist and, from it, the wheel;
the wheel goes into a fresh venv outside the checkout, and the installed command (not the work
tree) answers ``--version``, names a missing extra, and mirrors between two embedded brokers."""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

import mirror_maker
from mirror_maker.embedded import EmbeddedBroker

from ..budgets import setup_budget
from .harness import Cluster, MirrorProcess, make_records, mirror_files

ROOT = Path(__file__).resolve().parents[2]
NAME = f"kafka_mirror_maker-{mirror_maker.__version__}"

pytestmark = pytest.mark.needs_own_brokers("two embedded brokers of its own")


RUN_TIMEOUT_S = 600


def run(*command, cwd, timeout=RUN_TIMEOUT_S) -> str:
    result = subprocess.run([str(c) for c in command], cwd=str(cwd), capture_output=True, text=True,
                            timeout=timeout, env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
    assert result.returncode == 0, f"{command}: {result.stdout}{result.stderr}"
    return result.stdout


@pytest.fixture(scope="module")
@setup_budget(3 * RUN_TIMEOUT_S)  # build, venv, pip install
def installed(tmp_path_factory):
    """(the venv's bin folder, the dist folder): the wheel built from the sdist, installed."""
    work = tmp_path_factory.mktemp("package")
    run(sys.executable, "-m", "build", "--outdir", work / "dist", ROOT, cwd=work)
    run(sys.executable, "-m", "venv", work / "venv", cwd=work)
    wheel = work / "dist" / f"{NAME}-py3-none-any.whl"
    run(work / "venv" / "bin" / "pip", "install", "--quiet", "--disable-pip-version-check", wheel, cwd=work)
    return work / "venv" / "bin", work / "dist"


def test_the_wheel_and_sdist_carry_the_licence_and_the_metadata(installed):
    _bin, dist = installed
    with zipfile.ZipFile(dist / f"{NAME}-py3-none-any.whl") as wheel:
        names = wheel.namelist()
        metadata = wheel.read(f"{NAME}.dist-info/METADATA").decode()
    assert {f"{NAME}.dist-info/licenses/LICENSE", f"{NAME}.dist-info/licenses/NOTICE"} <= set(names)
    assert "License-Expression: Apache-2.0" in metadata and "Requires-Python: <3.14,>=3.9" in metadata
    assert "Provides-Extra: raw" in metadata and "# kafka-mirror-maker for Python" in metadata  # the README
    with tarfile.open(dist / f"{NAME}.tar.gz") as sdist:
        members = {Path(m).relative_to(NAME).as_posix() for m in sdist.getnames() if m != NAME}
    assert {"LICENSE", "NOTICE", "README.md", "setup.cfg", "config/kafka-mirror-maker.service"} <= members


def test_the_installed_command_runs_from_the_venv_not_the_checkout(installed, tmp_path):
    venv_bin, _dist = installed
    assert run(venv_bin / "kafka-mirror-maker", "--version", cwd=tmp_path).strip() == mirror_maker.__version__
    where = run(venv_bin / "python", "-c", "import mirror_maker; print(mirror_maker.__file__)", cwd=tmp_path)
    assert where.startswith(str(venv_bin.parent)) and str(ROOT) not in where
    venv = venv_bin.parent
    unit = (venv / "share" / "kafka-mirror-maker" / "config" / "kafka-mirror-maker.service").read_text()
    documentation = next(line for line in unit.splitlines() if line.startswith("Documentation="))
    # The unit names the README where a root install (prefix /usr/local) puts it; a venv's prefix is its folder.
    assert documentation == "Documentation=file:/usr/local/share/doc/kafka-mirror-maker/README.md"
    assert (venv / "share" / "doc" / "kafka-mirror-maker" / "README.md").is_file()


def test_the_installed_command_names_a_missing_extra(installed, tmp_path):
    venv_bin, _dist = installed
    consumer, producer = tmp_path / "c.properties", tmp_path / "p.properties"
    consumer.write_text("bootstrap.servers=127.0.0.1:1\ngroup.id=g\n")
    producer.write_text("bootstrap.servers=127.0.0.1:2\n")
    result = subprocess.run([str(venv_bin / "kafka-mirror-maker"), "--consumer.config", str(consumer),
                             "--producer.config", str(producer), "--include", "t", "--use.raw.bytes"],
                            cwd=str(tmp_path), capture_output=True, text=True, timeout=60)
    assert result.returncode == 1, result.stderr
    errors = [line for line in result.stderr.splitlines() if "ERROR" in line]
    assert len(errors) == 1 and "pip install 'kafka-mirror-maker[raw]'" in errors[0], result.stderr
    assert "Traceback" not in result.stderr


def test_the_installed_command_mirrors_between_embedded_brokers(installed, tmp_path):
    venv_bin, _dist = installed
    brokers = [EmbeddedBroker(name, tmp_path).start() for name in ("pkg-source", "pkg-target")]
    try:
        source, target = (Cluster(b.name, b.bootstrap, b) for b in brokers)
        topic = source.create_topic("installed", partitions=2)
        records = make_records(500)
        source.seed(topic, records)
        files = mirror_files(tmp_path, source, target)
        mirror = MirrorProcess([], tmp_path / "m.log", cwd=tmp_path, env={"PYTHONPATH": str(tmp_path)}, command=[
            str(venv_bin / "kafka-mirror-maker"), "--consumer.config", str(files.consumer),
            "--producer.config", str(files.producer), "--include", topic, "--exit.when.caught.up"])
        assert mirror.wait(120) == 0, mirror.log()
        assert sorted(r[2].value for r in target.read_all(topic, expected=500)) == sorted(r.value for r in records)
    finally:
        for broker in brokers:
            broker.stop()
