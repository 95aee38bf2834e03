"""Apache Kafka's jars from Maven Central, fetched once into a cache outside the repository.

One small pom per Kafka line (``maven/<name>.pom.xml``, dependencies only, nothing else in it:
Maven's "nearest wins" could otherwise pick a jackson that jackson-module-scala refuses) is
resolved with ``mvn dependency:copy-dependencies`` into ``<cache>/<name>/``. A marker file says
the folder is complete, and a file lock lets parallel runs share one download. The cache is
``$MIRROR_MAKER_KAFKA_CACHE``, else ``~/.cache/kafka-mirror-maker``.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
from pathlib import Path

HERE = Path(__file__).resolve().parent
CACHE_ENV = "MIRROR_MAKER_KAFKA_CACHE"
_COMPLETE = ".complete"
MAVEN_TIMEOUT_S = 900


def cache_root() -> Path:
    root = os.environ.get(CACHE_ENV) or os.path.join(os.path.expanduser("~"), ".cache", "kafka-mirror-maker")
    return Path(root)


def jar_folder(name: str) -> Path:
    """The folder holding every runtime jar of ``maven/<name>.pom.xml``, fetched if needed."""
    pom = HERE / "maven" / f"{name}.pom.xml"
    if not pom.exists():
        raise ValueError(f"no pom for {name} in {pom.parent}")
    folder = cache_root() / name
    if (folder / _COMPLETE).exists():
        return folder
    folder.parent.mkdir(parents=True, exist_ok=True)
    with open(folder.parent / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (folder / _COMPLETE).exists():  # another run fetched it while we waited
            return folder
        _fetch(pom, folder)
    return folder


def _fetch(pom: Path, folder: Path) -> None:
    mvn = shutil.which("mvn")
    if mvn is None:
        raise RuntimeError("Apache Kafka's jars come from Maven Central: install Maven (mvn) and Java 17+")
    partial = folder.with_name(folder.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    command = [mvn, "-q", "-B", "-f", str(pom), "dependency:copy-dependencies",
               "-DincludeScope=runtime", f"-DoutputDirectory={partial}"]
    result = subprocess.run(command, capture_output=True, text=True, timeout=MAVEN_TIMEOUT_S)
    if result.returncode != 0:
        tail = "\n".join((result.stdout + result.stderr).splitlines()[-15:])
        raise RuntimeError(f"mvn could not fetch the jars of {pom.name}:\n{tail}")
    shutil.rmtree(folder, ignore_errors=True)
    partial.rename(folder)
    (folder / _COMPLETE).write_text(pom.read_text())


def classpath(name: str) -> str:
    """A ``java -cp`` value for the jars of ``name`` (a wildcard, which java expands itself)."""
    return str(jar_folder(name) / "*")


def java() -> str:
    home = os.environ.get("JAVA_HOME")
    binary = os.path.join(home, "bin", "java") if home else shutil.which("java")
    if not binary or not os.path.exists(binary):
        raise RuntimeError("Apache Kafka needs Java 17 or later on PATH (or JAVA_HOME)")
    return binary
