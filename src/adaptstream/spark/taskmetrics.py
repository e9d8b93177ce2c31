"""Per-task metrics of finished stages, read from Spark's own status store (the data behind the UI and its REST
API ``/api/v1/applications/<id>/stages/...``), so reduce-side balance is measured, not assumed. The store is kept
whether or not the UI is enabled; it is reached through the JVM gateway and holds the last
``spark.ui.retainedStages`` stages (default 1000), so read it right after the job."""

from __future__ import annotations

from typing import Any


def stage_tasks(sc: Any, stage_id: int, attempt: int = 0, limit: int = 100_000) -> list[dict]:
    """Every finished task of one stage attempt: index, duration and run time (ms), records read from input and
    from the shuffle, records written to the shuffle."""
    store = sc._jsc.sc().statusStore()
    out = []
    it = store.taskList(int(stage_id), int(attempt), int(limit)).iterator()
    while it.hasNext():
        t = it.next()
        m = t.taskMetrics()
        if not m.isDefined():
            continue
        m = m.get()
        out.append(
            {
                "index": int(t.index()),
                "duration_ms": int(t.duration().get()) if t.duration().isDefined() else None,
                "run_ms": int(m.executorRunTime()),
                "input_records": int(m.inputMetrics().recordsRead()),
                "shuffle_records": int(m.shuffleReadMetrics().recordsRead()),
                "shuffle_written": int(m.shuffleWriteMetrics().recordsWritten()),
                "executor": str(t.executorId()),
                "launch_ms": int(t.launchTime().getTime()),
            }
        )
    return out


def job_stages(sc: Any, job_ids: list[int]) -> list[int]:
    tracker = sc.statusTracker()
    stages: set[int] = set()
    for j in job_ids:
        info = tracker.getJobInfo(j)
        if info is not None:
            stages.update(int(s) for s in info.stageIds)
    return sorted(stages)


def reduce_stage_tasks(sc: Any, job_ids: list[int], num_tasks: int) -> list[dict]:
    """Tasks of the reduce stage of these jobs: the stage that read a shuffle with exactly ``num_tasks`` tasks
    (the last such stage when several match)."""
    found: list[dict] = []
    for s in job_stages(sc, job_ids):
        tasks = stage_tasks(sc, s)
        if len(tasks) == num_tasks and any(t["shuffle_records"] for t in tasks):
            found = sorted(tasks, key=lambda t: t["index"])
    return found


def stage_totals(sc: Any, after: int = -1) -> dict[str, float]:
    """Executor time of every stage in the status store with an id above ``after``: run time and CPU time
    (seconds, summed over tasks), tasks, and the largest stage id seen (pass it as ``after`` next time, so a run's
    stages are those between two calls). Stages Spark no longer retains (``spark.ui.retainedStages``) are missing:
    raise that limit when runs are long."""
    store = sc._jsc.sc().statusStore()
    no_quantiles = sc._gateway.new_array(sc._jvm.double, 0)
    # stageList(statuses, details, withSummaries, unsortedQuantiles, taskStatus): Scala defaults do not reach py4j
    it = store.stageList(None, False, False, no_quantiles, None).iterator()
    run_ms, cpu_ns, tasks, last = 0, 0, 0, after
    while it.hasNext():
        s = it.next()
        sid = int(s.stageId())
        if sid <= after:
            continue
        last = max(last, sid)
        run_ms += int(s.executorRunTime())
        cpu_ns += int(s.executorCpuTime())
        tasks += int(s.numCompleteTasks())
    return {"run_s": run_ms / 1e3, "cpu_s": cpu_ns / 1e9, "tasks": tasks, "last_stage": last}
