"""Run one workload under one admission policy on Spark and leave metrics, results and plots in a run directory.

Used by the CLI (``adaptstream run`` / ``demo``) and the benchmarks, so every figure comes from the same path a user
runs. Layout of a run directory: run.json (what ran), metrics/ (datasets, batches, quarantine, manifest),
results/ (query output as Parquet, one folder per Spark batch), checkpoint/, summary.json.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from typing import TYPE_CHECKING, Any

from adaptstream.app.feedback import OnOutput, blocks_file
from adaptstream.errors import AdaptstreamError, ConfigError, query_error

if TYPE_CHECKING:
    from adaptstream.metrics.summary import RunSummary


@dataclass(frozen=True)
class RunSpec:
    workload: str
    admission: str = "lmstream"
    admission_params: str = ""  # "name=value;name=value" for the admission policy's config (e.g. history=8)
    traffic: str = "constant"
    rate: int = 1000
    duration: float = 60.0  # seconds of generated input (ignored with input_dir)
    seed: int = 0
    trigger: float = 10.0  # the fixed policy's interval
    margin: str = "auto"
    input_dir: str | None = None  # read standard CSV files from here (or a redis://HOST:PORT/STREAM) instead
    drain: bool = False  # emit every window at the end (needs the sentinel), then stop
    partitioner: str = "time"
    num_blocks: int = 2
    partitioner_params: str = ""
    finish_timeout: float = 300.0  # how long to wait for the backlog after the input ended
    warmup: float = 0.0  # seconds of first arrivals left out of the summary (raw metrics keep everything)
    reduce: str | None = None  # pane execution mode with this reduce allocator (spark/pane.py); None: as today
    reduce_buckets: int = 4  # reduce tasks per micro-batch in pane mode
    elastic: str | None = None  # pane mode: elasticity policy for reduce buckets and executors (needs a cluster)
    elastic_params: str = ""  # "name=value;name=value" for the elasticity policy (e.g. max_executors=3)

    def label(self) -> str:
        return f"{self.workload}-{self.admission}"

    def record(self) -> dict:
        """The spec as run.json and multi.json keep it: a Redis URL's password masked."""
        from adaptstream.connectors.redis import redact

        return {**asdict(self), "input_dir": redact(self.input_dir) if self.input_dir else self.input_dir}


@dataclass
class RunResult:
    spec: RunSpec
    run_dir: str
    summary: RunSummary
    slide: float
    unfinished: int = 0  # datasets that arrived but whose batch never completed before the timeout
    wall_seconds: float = 0.0
    extra: dict = field(default_factory=dict)

    @property
    def metrics_dir(self) -> str:
        return os.path.join(self.run_dir, "metrics")


def _count_lines(path: str) -> int:
    if not os.path.exists(path):
        return 0
    with open(path, "rb") as f:
        return f.read().count(b"\n")  # a line still being written is not counted yet


def _complete_lines(path: str) -> list[bytes]:
    """The newline-terminated lines of a JSON-lines file another process is appending to: a line still being
    written (no newline yet) is left for the next read, never parsed half-written."""
    if not os.path.exists(path):
        return []
    with open(path, "rb") as f:
        data = f.read()
    return [line for line in data[: data.rfind(b"\n") + 1].splitlines() if line.strip()]


def _last_is_sentinel(manifest: str) -> bool:
    lines = _complete_lines(manifest)
    return bool(lines) and bool(json.loads(lines[-1]).get("sentinel"))


def _read_jsonl(path: str) -> list[dict]:
    return [json.loads(line) for line in _complete_lines(path)]


def progress_snapshot(metrics_dir: str, warmup: float = 0.0) -> dict:
    """Cheap numbers for a live display, read from the run's files and counted as the summary counts them:
    batches that hold data (not the end-of-input marker) and that are not wholly inside the warm-up."""
    manifest = os.path.join(metrics_dir, "source", "manifest.jsonl")
    datasets = _read_jsonl(os.path.join(metrics_dir, "datasets.jsonl"))
    snap = {
        "arrived": _count_lines(manifest),
        "sealed": _last_is_sentinel(manifest),
        "completed": len(datasets),
        "batches": 0,
        "last_max_latency": None,
        "last_rows": None,
        "warmup": warmup,
        "warming_up": False,
    }
    data = [d for d in datasets if not d.get("sentinel")]
    first_counted = 0
    if warmup > 0:
        if not data:
            snap["warming_up"] = True
            return snap
        start = min(d["arrival"] for d in data)
        counted = [d["seq"] for d in data if d["arrival"] >= start + warmup]
        if not counted:
            snap["warming_up"] = True
            return snap
        first_counted = min(counted)
    batches = [
        b
        for b in _read_jsonl(os.path.join(metrics_dir, "batches.jsonl"))
        if b.get("max_latency", 0) > 0 and b["end"] > first_counted
    ]
    snap["batches"] = len({(b["start"], b["end"]) for b in batches})
    if batches:
        snap["last_max_latency"], snap["last_rows"] = batches[-1]["max_latency"], batches[-1]["rows"]
    return snap


def is_redis_url(value: str | None) -> bool:
    return bool(value) and str(value).startswith(("redis://", "rediss://"))


def source_options(spec: RunSpec, workload, run_dir: str) -> dict[str, str]:
    metrics = os.path.join(run_dir, "metrics")
    opts = {
        "admission": spec.admission,
        "admissionParams": spec.admission_params,
        "slide": str(workload.lmstream_slide),
        "trigger": str(spec.trigger),
        "margin": str(spec.margin),
        "metricsPath": metrics,
        "partitioner": spec.partitioner,
        "numBlocks": str(spec.num_blocks),
        "partitionerParams": spec.partitioner_params,
    }
    if spec.partitioner != "time":
        opts["partitionKey"] = ",".join(workload.key_columns)
    if spec.input_dir and is_redis_url(spec.input_dir):
        opts.update(connector="redis", path=spec.input_dir)
    elif spec.input_dir:
        opts.update(connector="files", path=spec.input_dir)
    else:
        opts.update(
            connector="generator",
            generator=workload.generator,
            traffic=spec.traffic,
            rate=str(spec.rate),
            duration=str(spec.duration),
            seed=str(spec.seed),
            path=os.path.join(run_dir, "input"),
        )
    if spec.elastic is not None:  # Alg. 4's map tasks: the pane executor writes it, the source plans by it
        opts["blocksFile"] = blocks_file(run_dir)
    if spec.drain:
        sentinel = os.path.join(run_dir, "sentinel.csv")
        opts.update(drain="true", sentinelPath=sentinel)
    return opts


def check_spec(spec: RunSpec, run_dir: str) -> None:
    """Every check that needs no Spark, so a wrong name, range or path fails in well under a second.

    Resolves the names against the registries and parses the exact option dict the source will get with
    ``SourceOptions.parse`` (the source's own validation), minus the end-of-input marker the runner writes later.
    """
    from adaptstream.admission import ADMISSION
    from adaptstream.config import parse_kv
    from adaptstream.connectors.traffic import TRAFFIC
    from adaptstream.partitioning import make_config
    from adaptstream.spark.options import SourceOptions
    from adaptstream.workloads import WORKLOADS

    workload = WORKLOADS.get(spec.workload)
    ADMISSION.get(spec.admission)
    TRAFFIC.get(spec.traffic)
    make_config(spec.partitioner, **parse_kv(spec.partitioner_params, "--partitioner-params"))
    ADMISSION.build(spec.admission, parse_kv(spec.admission_params, "--admission-params"))
    limits: tuple[tuple[str, float, float], ...] = (("rate", spec.rate, 0), ("num_blocks", spec.num_blocks, 1))
    for name, value, low in limits:
        if value < low:
            msg = f"--{name.replace('_', '-')} must be >= {low}, got {value}"
            raise ConfigError(msg)
    if spec.reduce is not None:
        from adaptstream.allocation import ALLOCATORS
        from adaptstream.spark.pane import pane_spec

        ALLOCATORS.get(spec.reduce)
        pane_spec(workload)
        if spec.reduce_buckets < 1:
            msg = f"--reduce-buckets must be >= 1, got {spec.reduce_buckets}"
            raise ConfigError(msg)
    if spec.elastic is not None:
        from adaptstream.elasticity import ELASTICITY

        ELASTICITY.get(spec.elastic)
        if spec.reduce is None:
            msg = "--elastic shapes the pane execution mode: pass --reduce hash|prompt|split as well"
            raise ConfigError(msg)
        elastic_policy(spec)  # unknown or malformed parameters fail here
    for name, value in (("duration", spec.duration), ("trigger", spec.trigger)):
        if not value > 0:
            msg = f"--{name} must be > 0 seconds, got {value:g}"
            raise ConfigError(msg)
    if spec.input_dir is not None and is_redis_url(spec.input_dir):
        from adaptstream.connectors.redis import check_reachable, parse_url

        check_reachable(parse_url(spec.input_dir))  # before Spark starts: a clear error naming host and port
    elif spec.input_dir is not None:
        if not os.path.exists(spec.input_dir):
            msg = f"--input {spec.input_dir!r} does not exist"
            raise ConfigError(msg)
        if not os.path.isdir(spec.input_dir):
            msg = f"--input {spec.input_dir!r} is not a directory (pass the directory that holds the CSV files)"
            raise ConfigError(msg)
    opts = source_options(spec, workload, run_dir)
    opts.pop("sentinelPath", None)
    opts.pop("drain", None)
    SourceOptions.parse(opts)


def elastic_policy(spec: RunSpec):
    """The run's elasticity policy: Alg. 4 starts from the run's blocks and buckets unless ``elastic_params``
    says otherwise (a static plan takes its counts from ``elastic_params`` alone)."""
    import dataclasses

    from adaptstream.elasticity import ELASTICITY, build_elasticity
    from adaptstream.policy import parse_params

    params: dict[str, Any] = dict(parse_params(spec.elastic_params, "--elastic-params"))
    fields = {f.name for f in dataclasses.fields(ELASTICITY.get(str(spec.elastic)))}
    defaults = {"initial_map_tasks": spec.num_blocks, "initial_reduce_buckets": spec.reduce_buckets}
    for name, count in defaults.items():
        if name in fields:
            params.setdefault(name, count)
    return build_elasticity(str(spec.elastic), **params)


def input_files(input_dir: str) -> list[str]:
    """The data files a files-connector run will read (hidden files and our own state are skipped)."""
    return sorted(
        n for n in os.listdir(input_dir) if not n.startswith((".", "_")) and os.path.isfile(os.path.join(input_dir, n))
    )


def _write_sentinel(workload, generator, run_dir: str, spec: RunSpec) -> None:
    from adaptstream.workloads.io import write_dataset

    after = int(spec.duration) if not spec.input_dir else 10**9  # beyond any real trace time
    write_dataset(workload.sentinel(after), os.path.join(run_dir, "sentinel.csv"), "csv", generator.csv_header())


def _machine() -> dict:
    return {
        "host": platform.node(),
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "platform": platform.platform(),
    }


def run_workload(
    spark,
    spec: RunSpec,
    run_dir: str,
    on_progress: Callable[[dict], None] | None = None,
    fresh: bool = True,
    extra_options: dict[str, str] | None = None,
    query_name: str | None = None,
    on_output: OnOutput | None = None,
) -> RunResult:
    """Start the query, wait until the input is done and every dataset's batch completed, stop, summarise.

    ``extra_options`` are added to the source's options (the multi-query runner passes the controller's);
    ``query_name`` replaces the default ``<workload>_<admission>`` (active queries need distinct names);
    ``on_output(batch_id, rows_out)`` hears how many result rows each micro-batch wrote (also recorded in
    ``metrics/outputs.jsonl``; the multi-query runner feeds it to the scheduler as measured selectivity)."""
    from adaptstream.metrics.summary import summarize

    # Absolute paths: Spark's JVM and the source's Python process keep the working directory they started in.
    run_dir = os.path.abspath(run_dir)
    if spec.input_dir and not is_redis_url(spec.input_dir):
        spec = replace(spec, input_dir=os.path.abspath(spec.input_dir))
    check_spec(spec, run_dir)
    workload, generator = _prepare_run_dir(spark, spec, run_dir, fresh)
    reader = spark.readStream.format("adaptstream").schema(generator.spark_schema_ddl)
    for k, v in {**source_options(spec, workload, run_dir), **(extra_options or {})}.items():
        reader = reader.option(k, v)
    if spec.reduce is not None:  # pane mode: the raw stream, each micro-batch one map/reduce job we shape
        out, sink = reader.load(), _pane_sink(spark, spec, workload, run_dir)
    else:
        out, sink = workload.stream_query(reader.load()), _batch_writer(workload, run_dir, on_output)
    t0 = time.time()
    query = (
        out.writeStream.outputMode("append")
        .foreachBatch(sink)
        .option("checkpointLocation", os.path.join(run_dir, "checkpoint"))
        .queryName((query_name or spec.label()).replace("-", "_"))
        .start()
    )
    metrics_dir = os.path.join(run_dir, "metrics")
    try:
        unfinished = _wait_until_done(query, spec, metrics_dir, on_progress)
    finally:
        query.stop()
    wall = time.time() - t0
    summary = summarize(metrics_dir, workload.lmstream_slide or None, spec.warmup)
    result = RunResult(spec, run_dir, summary, workload.lmstream_slide, unfinished, wall)
    with open(os.path.join(run_dir, "summary.json"), "w") as f:
        extra = {"unfinished": unfinished, "wall_seconds": wall, "slide": workload.lmstream_slide}
        json.dump({**summary.as_dict(), **extra}, f, indent=2)
    return result


def _prepare_run_dir(spark, spec: RunSpec, run_dir: str, fresh: bool) -> tuple[Any, Any]:
    """The run's folder (emptied when ``fresh``) with its ``run.json`` and, for a drained run, the end-of-input
    rows; returns the workload and its generator."""
    from adaptstream.workloads import GENERATORS, WORKLOADS

    workload = WORKLOADS.get(spec.workload)
    generator = GENERATORS.get(workload.generator)(seed=spec.seed).build()
    if fresh and os.path.exists(run_dir):
        shutil.rmtree(run_dir)
    os.makedirs(run_dir, exist_ok=True)
    record = {
        "spec": spec.record(),
        "started": time.time(),
        "machine": _machine(),
        "spark": spark.version,
        "master": spark.sparkContext.master,
    }
    with open(os.path.join(run_dir, "run.json"), "w") as f:
        json.dump(record, f, indent=2)
    if spec.drain:
        _write_sentinel(workload, generator, run_dir, spec)
    return workload, generator


def _pane_sink(spark, spec: RunSpec, workload: Any, run_dir: str) -> Callable[..., None]:
    """The pane mode's executor (spark/pane.py), with Alg. 4 and the cluster's executors when ``elastic``."""
    from adaptstream.spark.pane import PaneExecutor

    assert spec.reduce is not None  # the caller's pane-mode branch
    elastic, control = None, None
    if spec.elastic is not None:
        from adaptstream.spark.executors import ExecutorControl

        control = ExecutorControl(spark.sparkContext)  # refuses local[*]
        elastic = elastic_policy(spec)
    return PaneExecutor(
        workload,
        spec.reduce,
        spec.reduce_buckets,
        os.path.join(run_dir, "pane-state"),
        os.path.join(run_dir, "results"),
        os.path.join(run_dir, "metrics"),
        elastic=elastic,
        executors=control,
        batch_interval=spec.trigger,
        blocks_file=blocks_file(run_dir) if elastic is not None else None,
    )


def _batch_writer(workload: Any, run_dir: str, on_output: OnOutput | None) -> Callable[..., None]:
    """``foreachBatch`` of a built-in query: each batch's results to ``results/batch_id=N`` (overwritten when
    Spark replays it) and its row count to ``metrics/outputs.jsonl`` and ``on_output``."""
    results = os.path.join(run_dir, "results")
    outputs = os.path.join(run_dir, "metrics", "outputs.jsonl")

    def write_batch(batch_df, batch_id: int) -> None:
        folder = os.path.join(results, f"batch_id={batch_id}")
        workload.finalize_batch(batch_df).write.mode("overwrite").parquet(folder)
        rows_out = parquet_rows(folder)  # from the files' footers: no second Spark job
        os.makedirs(os.path.dirname(outputs), exist_ok=True)
        with open(outputs, "a") as f:
            f.write(json.dumps({"batch_id": batch_id, "rows_out": rows_out, "written": time.time()}) + "\n")
        if on_output is not None:
            on_output(batch_id, rows_out)

    return write_batch


def parquet_rows(folder: str) -> int:
    """Rows in the Parquet files of ``folder``, read from their footers."""
    import pyarrow.parquet as pq

    if not os.path.isdir(folder):
        return 0
    names = [n for n in os.listdir(folder) if n.endswith(".parquet")]
    return sum(pq.ParquetFile(os.path.join(folder, n)).metadata.num_rows for n in names)


def _raise_if_failed(query) -> None:
    exc = query.exception()
    if exc is not None:
        raise query_error(str(exc) or repr(exc)) from exc


def _wait_until_done(query, spec: RunSpec, metrics_dir: str, on_progress) -> int:
    """Block until the input ended and its datasets were processed; return how many were left unfinished."""
    deadline: float | None = None
    expected = None if spec.input_dir else round(spec.duration)
    quiet = 0
    while True:
        time.sleep(0.5)
        if not query.isActive:
            _raise_if_failed(query)
            msg = "the streaming query stopped unexpectedly"
            raise AdaptstreamError(msg)
        snap = progress_snapshot(metrics_dir, spec.warmup)
        if on_progress:
            on_progress(snap)
        target = snap["arrived"]
        input_over = snap["sealed"] if spec.drain else (expected is not None and snap["arrived"] >= expected)
        if input_over and deadline is None:
            deadline = time.time() + spec.finish_timeout
        if input_over and snap["completed"] >= target:
            status = query.status
            quiet = quiet + 1 if not (status["isTriggerActive"] or status["isDataAvailable"]) else 0
            if not spec.drain or quiet >= 3:  # drain: let the no-data batch emit the last windows
                return 0
        if deadline is not None and time.time() > deadline:
            return max(target - snap["completed"], 0)
        if expected is None and not spec.drain:
            msg = "reading --input without --drain never ends; pass --drain"
            raise ConfigError(msg)
