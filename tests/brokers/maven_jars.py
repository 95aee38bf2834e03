"""Apache Kafka's jars from Maven Central, fetched once into a cache outside the repository.

One small pom per Kafka line (``maven/<name>.pom.xml``, dependencies only, nothing else in it:
Maven's "nearest wins" could otherwise pick a jackson that jackson-module-scala refuses) is
resolved with ``mvn dependency:copy-dependencies`` into ``<cache>/<name>/``. A marker file says
the folder is complete, and a file lock lets parallel runs share one download. The cache is
``$MIRROR_MAKER_KAFKA_CACHE``, else ``~/.cache/kafka-mirror-maker``. The tests' Java programs
(``java/``) are compiled into the same cache, once.
"""

from __future__ import annotations

import fcntl
import hashlib
import logging
import os
import shutil
import subprocess
from pathlib import Path
from typing import Callable, List, Optional, Set

log = logging.getLogger(__name__)

HERE = Path(__file__).resolve().parent
CACHE_ENV = "MIRROR_MAKER_KAFKA_CACHE"
_COMPLETE = ".complete"
MAVEN_TIMEOUT_S = 900


def cache_root() -> Path:
    root = os.environ.get(CACHE_ENV) or os.path.join(os.path.expanduser("~"), ".cache", "kafka-mirror-maker")
    return Path(root)


def jars_cached(name: str) -> bool:
    return (cache_root() / name / _COMPLETE).exists()


def jar_folder(name: str) -> Path:
    """The folder holding every runtime jar of ``maven/<name>.pom.xml``, fetched if needed."""
    pom = HERE / "maven" / f"{name}.pom.xml"
    if not pom.exists():
        raise ValueError(f"no pom for {name} in {pom.parent}")
    folder = cache_root() / name
    if jars_cached(name):
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


def java_program(source: Path, jars: str) -> List[str]:
    """The command prefix that runs the Java program ``source`` (one class, e.g.
    ``java/MirrorClientCheck.java``) against the jars of ``jars``: compiled once per cache with
    ``javac`` (the source, the jars and the Java build name its folder) rather than in Java's
    source-file mode, which compiles it again at every run, seconds of CPU each on a busy machine."""
    folder = _program_folder(source, jars)
    command = [java(), "-cp", f"{folder}{os.pathsep}{classpath(jars)}", source.stem]
    if (folder / _COMPLETE).exists():
        return command
    folder.parent.mkdir(parents=True, exist_ok=True)
    with open(folder.with_name(folder.name + ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (folder / _COMPLETE).exists():  # another run compiled it while we waited
            return command
        javac = shutil.which("javac", path=os.path.dirname(java())) or shutil.which("javac")
        if javac is None:
            raise RuntimeError(f"compiling {source.name} needs javac (a JDK 17+, not only a JRE)")
        shutil.rmtree(folder, ignore_errors=True)
        result = subprocess.run([javac, "-nowarn", "-d", str(folder), "-cp", classpath(jars), str(source)],
                                capture_output=True, text=True, timeout=MAVEN_TIMEOUT_S)
        if result.returncode != 0:
            raise RuntimeError(f"javac could not compile {source}:\n{result.stdout}{result.stderr}")
        (folder / _COMPLETE).write_text(str(source))
    return command


def _program_folder(source: Path, jars: str) -> Path:
    digest = hashlib.sha1(source.read_bytes() + f"{jars}:{_java_build()}".encode()).hexdigest()[:10]
    return cache_root() / "java-programs" / f"{source.stem}-{digest}"


def java_program_cached(source: Path, jars: str) -> bool:
    return (_program_folder(source, jars) / _COMPLETE).exists()


#: Archives that could not be made in this process (not tried again here; another run may).
_unarchivable: Set[str] = set()


def class_archive(name: str, app: str, train: Callable[[List[str]], None]) -> Optional[Path]:
    """A class-data sharing archive (JDK 13+'s dynamic AppCDS) of the classes ``app`` loads from
    ``name``'s jars, so that a JVM maps them instead of loading and verifying each: a Kafka node
    starts in about half the CPU time, which every cluster start and node restart of the suite
    pays on a 2-core machine. Made once per Java build, beside the jars, by ``train(flags)`` (a
    run of the app that ends normally, with ``flags``); a file lock lets parallel runs share it.
    None if it cannot be made: the JVMs then start without one."""
    path = archive_path(name, app)
    if path.exists():
        return path
    if str(path) in _unarchivable:
        return None
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_name(path.name + ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if path.exists():  # another run made it while we waited
            return path
        partial = path.with_name(path.name + ".partial")
        if partial.exists():
            partial.unlink()
        try:
            train([f"-XX:ArchiveClassesAtExit={partial}"])
        except Exception as exc:  # the JVMs start without one: slower, nothing else
            log.warning("no class-data sharing archive for %s: %s", name, exc)
        if partial.exists() and _maps(partial, name):
            os.replace(partial, path)
            return path
        _unarchivable.add(str(path))
        return None


def archive_path(name: str, app: str) -> Path:
    return cache_root() / f"{name}-{app}-{_java_build()}.jsa"


def _maps(archive: Path, name: str) -> bool:
    """Whether a JVM maps the archive (one cut short, e.g. by a kill during its writing, is not
    used: mapping it crashes the JVM)."""
    import tempfile

    with tempfile.TemporaryDirectory() as crash_folder:  # where a crash leaves its report
        check = subprocess.run([java(), "-Xshare:on", f"-XX:SharedArchiveFile={archive}", "-XX:-CreateCoredumpOnCrash",
                                "-cp", classpath(name), "-version"],
                               capture_output=True, text=True, timeout=60, cwd=crash_folder)
    if check.returncode != 0:
        log.warning("the class-data sharing archive for %s does not map: %s", name,
                    (check.stdout + check.stderr)[-500:])
    return check.returncode == 0


def _java_build() -> str:
    """Names the Java installation: an archive only fits the JVM build that wrote it."""
    binary = os.path.realpath(java())
    stat = os.stat(binary)
    return hashlib.sha1(f"{binary}:{stat.st_mtime_ns}:{stat.st_size}".encode()).hexdigest()[:10]
