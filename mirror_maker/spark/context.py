"""The process's one SparkContext, which every driver of the process submits its jobs to.

A Spark application has one SparkContext per process, and a JVM of its own that takes seconds to
start: ``kafka-mirror-maker --spark`` runs one driver on it, ``connect-mirror-maker --spark`` one
driver per flow. Starting it is in two steps so that what fails in a second fails before the
JVM starts: ``prepare`` (pyspark, ``--spark.py.files``, the forced settings' WARNs, the workers'
Python, the SparkConf) and ``start`` (the JVM, then the plugin modules shipped to the executors).
"""

from __future__ import annotations

import logging
import os
import re
import sys
import tempfile
from typing import Iterable, Optional, Tuple

from ..errors import ConfigError
from ..extras import require
from .settings import SparkOptions, SparkPlan, parse_conf, submitted_notes, worker_python
from .shipping import check_py_files, modules_to_ship, pack

log = logging.getLogger("mirror_maker.spark.driver")


def import_pyspark():
    return require("spark", "pyspark", "--spark")


def describe_job_error(text: str) -> str:
    """The line of a Spark failure that says what happened (Py4J errors are pages long)."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    for pattern in (r"BarrierJobSlotsNumberCheckFailed", r"cannot reach the driver's control channel",
                    r"Python worker exited unexpectedly", r"Job aborted due to stage failure",
                    r"Exception: ", r"Error: "):
        for line in lines:
            if re.search(pattern, line):
                return line[:400]
    return (lines[0] if lines else "unknown error")[:400]


class SparkRuntime:
    """One SparkContext and what it ships to the executors; ``sc`` once started."""

    def __init__(self, options: SparkOptions, spark: SparkPlan, plugins: Iterable[Optional[str]] = ()) -> None:
        """``plugins``: the dotted paths of the user's classes the tasks load (handlers,
        listeners, replication policies): a module only this machine has is shipped."""
        self.options = options
        self.spark = spark
        self.plugins = tuple(plugins)
        self.sc = None
        self._conf = None
        self._py_files: Tuple[str, ...] = ()
        self._workdir: Optional[tempfile.TemporaryDirectory] = None

    @property
    def local(self) -> bool:
        return self.spark.local

    @property
    def master(self) -> str:
        return self.spark.master

    def prepare(self) -> None:
        """Everything before the JVM: the checks and settings that fail at once."""
        pyspark = import_pyspark()
        self._py_files = tuple(check_py_files(self.options.py_files))
        for level, note in self.spark.notes:
            log.log(getattr(logging, level), "%s", note)
        python, note = worker_python(self.spark.local, os.environ, sys.executable)
        if note:
            log.warning("%s", note) if self.spark.local else log.info("%s", note)
        if python:
            os.environ["PYSPARK_PYTHON"] = python  # the conf key is ignored by a python-started app
        if self.spark.local:
            os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        conf = pyspark.SparkConf()  # under spark-submit: the settings it was given
        submitted = dict(conf.getAll())
        for level, note in submitted_notes(submitted, parse_conf(self.options.conf)):
            log.log(getattr(logging, level), "%s", note)
        conf.setMaster(self.spark.master)
        for key, value in self.spark.conf.items():
            if key not in self.spark.defaulted or key not in submitted:
                conf.set(key, value)
        self._conf = conf

    def start(self, streams: int, detail: str = "") -> None:
        """The SparkContext (a JVM: seconds), then the plugin modules and py files shipped."""
        if self._conf is None:
            self.prepare()
        pyspark = import_pyspark()
        log.info("Starting Spark (master %s) for %d streams%s", self.spark.master, streams, detail)
        logging.getLogger("py4j").setLevel(logging.WARNING)  # a line per gateway connection
        try:
            self.sc = pyspark.SparkContext(conf=self._conf)
        except Exception as exc:
            raise ConfigError(f"--spark: Spark did not start (it needs Java 17 or later on PATH or "
                              f"in JAVA_HOME): {describe_job_error(str(exc))}") from None
        self._workdir = tempfile.TemporaryDirectory(prefix="mirror-maker-spark-")
        for name, location in modules_to_ship(self.plugins):
            log.info("Shipping %s (%s) to the Spark executors", name, location)
            self.sc.addPyFile(pack(name, location, self._workdir.name))
        for path in self._py_files:
            self.sc.addPyFile(path)

    def control_address(self) -> Tuple[str, str]:
        """(the host workers connect to, the address the control server binds): loopback in
        local mode, else the driver host Spark's executors already reach."""
        if self.spark.local:
            return "127.0.0.1", "127.0.0.1"
        return self.sc.getConf().get("spark.driver.host"), "0.0.0.0"

    def close(self) -> None:
        if self.sc is not None:
            self.sc.stop()
            self.sc = None
        if self._workdir is not None:
            self._workdir.cleanup()
            self._workdir = None
