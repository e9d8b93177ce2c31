"""Executors at run time, through Spark's own cluster-manager requests (``SparkContext.requestTotalExecutors`` /
``killExecutor``, a Scala developer API reached through the JVM gateway). Standalone, YARN and Kubernetes honour
them; ``local[*]`` runs one executor inside the driver and cannot, so :class:`ExecutorControl` refuses it with a
clear error. ``killExecutor`` is refused by Spark while dynamic allocation is on: use one or the other."""

from __future__ import annotations

import time
from typing import Any

from adaptstream.errors import ConfigError


def check_elastic_master(master: str) -> None:
    """Elasticity changes executors, which only a cluster manager can do."""
    if master.strip().lower().startswith("local"):
        msg = (
            f"--elastic needs a cluster manager (a spark:// standalone master, YARN or Kubernetes) to add and "
            f"remove executors; {master!r} runs one executor inside the driver (start a standalone cluster with "
            "scripts/cluster.sh start N and pass --master spark://127.0.0.1:7077)"
        )
        raise ConfigError(msg)


class ExecutorControl:
    """Live executor ids and a target count the cluster manager is asked to meet."""

    def __init__(self, sc: Any) -> None:
        check_elastic_master(sc.master)
        if sc.getConf().get("spark.dynamicAllocation.enabled", "false").lower() == "true":
            msg = "adaptstream's elasticity and Spark's dynamic allocation cannot both manage executors"
            raise ConfigError(msg)
        self.sc = sc
        self._jsc = sc._jsc.sc()

    def executors(self) -> list[str]:
        """Ids of the executors alive now (the driver is not one)."""
        seq = self._jsc.getExecutorIds()
        it = seq.iterator()
        ids = []
        while it.hasNext():
            ids.append(str(it.next()))
        return sorted(ids, key=lambda x: int(x) if x.isdigit() else x)

    def scale_to(self, n: int) -> dict:
        """Ask for ``n`` executors: kill the newest surplus ones (without replacement) and set the cluster
        manager's target to ``n`` (``requestTotalExecutors``). Executors arrive asynchronously (``wait_for``)."""
        if n < 1:
            msg = f"an application needs at least one executor, got {n}"
            raise ConfigError(msg)
        live = self.executors()
        victims = live[n:] if n < len(live) else []
        for e in reversed(victims):
            self._jsc.killExecutor(e)  # lowers the target by one, never below 0
        # An absolute target: after kills a relative requestExecutors(k) would count from the lowered target.
        jvm = self.sc._jvm
        self._jsc.requestTotalExecutors(n, 0, jvm.PythonUtils.toScalaMap(jvm.java.util.HashMap()))
        return {"requested": max(0, n - len(live)), "killed": victims}

    def wait_for(self, n: int, timeout: float = 60.0, poll: float = 0.25) -> bool:
        """True once exactly ``n`` executors are alive (within ``timeout`` seconds)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if len(self.executors()) == n:
                return True
            time.sleep(poll)
        return len(self.executors()) == n


def executor_intervals(sc: Any) -> list[dict]:
    """Every executor the application had, alive or removed, with Spark's own add/remove times (epoch seconds;
    ``removed`` None while alive), from the status store (the data behind the REST API's ``allexecutors``; it is
    kept with the UI disabled). What executor-seconds are integrated from: what Spark ran, not what was planned."""
    seq = sc._jsc.sc().statusStore().executorList(False)
    it = seq.iterator()
    out = []
    while it.hasNext():
        e = it.next()
        if str(e.id()) == "driver":
            continue
        removed = e.removeTime()
        out.append(
            {
                "id": str(e.id()),
                "added": e.addTime().getTime() / 1000.0,
                "removed": removed.get().getTime() / 1000.0 if removed.isDefined() else None,
            }
        )
    return sorted(out, key=lambda x: x["added"])
