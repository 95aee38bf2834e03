"""``connect-mirror-maker --spark``: every flow's streams as the tasks of Spark jobs.

One SparkContext for the process (``spark.context``), shared by every flow this node runs: in
local mode ``local[N]``, N the sum of ``tasks.max`` over those flows, so that every flow's job
has its slots at once; or the master given (``--spark.master``, spark-submit's ``--master``), which
must have N slots. Each flow is one :class:`~mirror_maker.spark.driver.SparkDriver` in the flow's
thread of the supervisor: one barrier job of ``tasks.max`` tasks, its own control channel and
token, and its own job group, so stopping or restarting one flow cancels only its job. A flow's
job that fails is restarted by its driver (``--spark.max.restarts``), then by the supervisor as
any failed flow is, with the same fatal rules (a worker's failure keeps its class).

What stays in this process: the supervisor (signals, exit status, one status line per flow, the
ops endpoint), each flow's singleton election, and the pairs run for their heartbeats only. The
singletons of an enabled flow run in its task 0 (the engine runs them with stream 0), only
while this process holds the flow's election: the driver tells the task whenever that changes.
So, as without Spark, they run on one live node of all those running the file.
"""

from __future__ import annotations

import logging
from typing import Callable, List, Optional, Tuple

from ..engine.runner import JOIN_GRACE_S
from ..errors import ClientFailed, MirrorMakerError
from ..spark.context import SparkRuntime, import_pyspark
from ..spark.driver import SparkDriver, submitted_master
from ..spark.settings import SparkOptions, plan as make_plan
from .flows import Flow

log = logging.getLogger("mirror_maker.dedicated")


class OnSpark:
    """One run of an enabled flow as the tasks of a Spark job (what ``InProcess`` is in threads)."""

    def __init__(self, flow: Flow, runtime: SparkRuntime, options: SparkOptions,
                 singletons: Callable[[], bool], worker_metrics: bool) -> None:
        self.driver = SparkDriver(flow.config, runtime, options.max_restarts, name=flow.name,
                                  singletons=singletons, worker_metrics=worker_metrics)

    def run(self) -> Optional[Exception]:
        """Until stopped or failed; the failure, as the engine raised it in a worker."""
        driver = self.driver
        try:
            driver.start()
            driver.run()
            return None
        except MirrorMakerError as exc:
            return exc
        except Exception as exc:  # e.g. the SparkContext went away: retried like a client error
            log.debug("the Spark driver of %s failed", driver.name, exc_info=True)
            return ClientFailed(f"{type(exc).__name__}: {exc}")
        finally:
            driver.close()

    def request_stop(self, signum: Optional[int] = None) -> None:
        self.driver.request_stop(signum)

    def snapshot(self) -> dict:
        return self.driver.snapshot()

    def readiness(self) -> Tuple[bool, str]:
        return self.driver.readiness()

    def metrics(self):
        """(the workers' metrics, the streams running now), as a process's mirror has them."""
        return self.driver.metrics, self.driver.running()


class SparkFlows:
    """The process's SparkContext for the enabled flows of this node, checked before anything
    connects (pyspark installed, enough local slots, ``--spark.py.files``)."""

    def __init__(self, flows: List[Flow], options: SparkOptions, worker_metrics: bool) -> None:
        self.options = options
        self.worker_metrics = worker_metrics
        self.flows = [flow for flow in flows if flow.enabled]
        self.streams = sum(flow.config.num_streams for flow in self.flows)
        self.runtime: Optional[SparkRuntime] = None
        if not self.flows:
            log.info("--spark: no flow into this node's clusters is enabled; heartbeats need no Spark")
            return
        pyspark = import_pyspark()
        spark = make_plan(options, self.streams, submitted_master=submitted_master(pyspark),
                          asked=f"tasks.max over this node's flows ({self.streams} in all)")
        # A replication policy given as a Python class is loaded by every task.
        policies = sorted({flow.config.replication.policy for flow in self.flows if flow.config.replication.policy})
        self.runtime = SparkRuntime(options, spark, policies)
        self.runtime.prepare()

    def start(self) -> None:
        """The SparkContext (a JVM: seconds); nothing to start without an enabled flow."""
        if self.runtime is not None:
            detail = ", ".join(f"{flow.name}: {flow.config.num_streams}" for flow in self.flows)
            self.runtime.start(self.streams, f" ({detail})")

    def attempt(self, flow: Flow, singletons: Callable[[], bool]) -> OnSpark:
        return OnSpark(flow, self.runtime, self.options, singletons, self.worker_metrics)

    @staticmethod
    def stop_bound_s(flow: Flow) -> float:
        """A flow's stop: its workers' bound, then its driver's cancel and kill."""
        return SparkDriver.stop_bound(flow.config) + JOIN_GRACE_S

    def close(self) -> None:
        if self.runtime is not None:
            self.runtime.close()
