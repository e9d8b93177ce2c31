"""SIMULATED trace corpus on Spark: generate query + hardware + placement per seed, label it with the simulated testbed,
write JSON-lines partitions. Resumable, deterministic, and split by trace hash.

Layout of a corpus directory::

    manifest.json                 seeds, sizes, per-partition counts, class balance, timings, simulator config
    traces/part-00000.jsonl       one Trace per line (labels origin="simulated")
    ...

Trace i of a corpus with seed s is a pure function of (s, i): re-running with the same arguments rewrites
the same bytes, and a run that was interrupted only generates the partitions whose file is missing.
Executors write their partition directly, so on a real cluster `out_dir` must be on storage every worker
can reach (NFS, a
shared volume); with `local[N]` it is just a local folder.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from adaptstream.costmodel.corpus import MANIFEST
from adaptstream.costmodel.generate import HardwareGenerator, QueryGenerator, sample_trace
from adaptstream.costmodel.model import Trace, read_traces
from adaptstream.errors import CostModelError
from adaptstream_bench.costmodel.simulator import SimConfig, Simulator


def trace_for(seed: int, index: int, sim: Simulator | None = None) -> Trace:
    """The index-th trace of the corpus with this seed: sampled, placed and labelled (simulated)."""
    rng = np.random.default_rng([seed, index])
    trace = sample_trace(rng, f"s{seed}-{index:07d}", QueryGenerator(), HardwareGenerator())
    sim = sim or Simulator()
    sim_seed = int(rng.integers(0, 2**31 - 1))
    res = sim.run(trace, sim_seed)
    meta = {
        "seed": seed,
        "index": index,
        "sim_seed": sim_seed,
        "generator": "costmodel.generate",
        **{f"sim_{k}": v for k, v in res.details.items()},
    }
    return dataclasses.replace(trace, labels=res.labels, meta=meta)


def _part_path(out_dir: Path, part: int) -> Path:
    return out_dir / "traces" / f"part-{part:05d}.jsonl"


def generate_partition(
    out_dir: str, seed: int, part: int, start: int, stop: int, sim_config: dict[str, Any] | None = None
) -> dict[str, Any]:
    """Write traces [start, stop) to one partition file (atomically, via a temp file); return its summary."""
    t0 = time.perf_counter()
    sim = SimConfig(**(sim_config or {})).build()
    path = _part_path(Path(out_dir), part)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".tmp{os.getpid()}")
    summary = _empty_summary(part, start, stop)
    with tmp.open("w", encoding="utf-8") as fh:
        for i in range(start, stop):
            t = trace_for(seed, i, sim)
            fh.write(t.to_json() + "\n")
            _count(summary, t)
    os.replace(tmp, path)
    summary["seconds"] = round(time.perf_counter() - t0, 3)
    return summary


def _empty_summary(part: int, start: int, stop: int) -> dict[str, Any]:
    counts = dict.fromkeys(("n", "backpressure", "failed", "oom", "no_output"), 0)
    return {"part": part, "start": start, "stop": stop, **counts, "by_type": {}}


def _count(summary: dict[str, Any], t: Trace) -> None:
    lab = t.labels
    assert lab is not None
    summary["n"] += 1
    summary["backpressure"] += int(bool(lab.backpressure))
    summary["failed"] += int(not lab.success)
    reason = t.meta.get("sim_failure_reason", "")
    if reason in ("oom", "no_output"):
        summary[reason] += 1
    qt = t.query.query_type
    summary["by_type"][qt] = summary["by_type"].get(qt, 0) + 1


def _summarise_file(path: Path, part: int, start: int, stop: int) -> dict[str, Any]:
    summary = {**_empty_summary(part, start, stop), "seconds": None}
    for t in read_traces(path):
        _count(summary, t)
    return summary


def build_corpus(
    out_dir: str | Path,
    n_traces: int,
    seed: int = 0,
    master: str | None = None,
    partitions: int | None = None,
    spark: Any = None,
    sim_config: SimConfig | None = None,
    progress: Callable[[dict[str, Any], int, int], None] | None = None,
) -> dict[str, Any]:
    """Generate (or finish) a corpus of `n_traces` simulated traces with PySpark; returns the manifest.

    `partitions` defaults to one per 500 traces. `spark` reuses a session (tests); otherwise one is built with
    `build_spark(master or "local[2]")` and stopped at the end. `progress(summary, done, total)` is called on
    the driver as each partition finishes.
    """
    if n_traces <= 0:
        msg = f"n_traces must be > 0, got {n_traces}"
        raise CostModelError(msg)
    out = Path(out_dir).resolve()
    out.mkdir(parents=True, exist_ok=True)
    n_parts = partitions or max(1, math.ceil(n_traces / 500))
    bounds = [(p, p * n_traces // n_parts, (p + 1) * n_traces // n_parts) for p in range(n_parts)]
    cfg = dataclasses.asdict(sim_config or SimConfig())
    old = _read_manifest(out)
    if old and (
        old["seed"] != seed
        or old["n_traces"] != n_traces
        or old["partitions"] != n_parts
        or old.get("sim_config") != cfg
    ):
        msg = (
            f"{out} already holds a corpus with different settings (seed {old['seed']}, {old['n_traces']} "
            f"traces, {old['partitions']} partitions); use another directory"
        )
        raise CostModelError(msg)
    done = [b for b in bounds if _part_path(out, b[0]).exists()]
    todo = [b for b in bounds if not _part_path(out, b[0]).exists()]
    summaries = {b[0]: _summarise_file(_part_path(out, b[0]), *b) for b in done}
    t0 = time.perf_counter()
    if todo:
        own = spark is None
        if own:
            from adaptstream.spark.session import build_spark

            spark = build_spark(master or "local[2]", app_name="adaptstream-costmodel-corpus")
        try:
            rdd = spark.sparkContext.parallelize(todo, numSlices=len(todo))
            out_s = str(out)
            job = rdd.map(lambda b: generate_partition(out_s, seed, b[0], b[1], b[2], cfg))
            for s in _collect_with_progress(job, out, todo):
                summaries[s["part"]] = s
                if progress:
                    progress(s, len(summaries), n_parts)
        finally:
            if own:
                spark.stop()
    elapsed = time.perf_counter() - t0
    manifest = _manifest(seed, n_traces, n_parts, cfg, summaries, elapsed, [b[0] for b in todo], old)
    (out / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n")
    return manifest


def _collect_with_progress(job: Any, out: Path, todo: list) -> Iterator[dict[str, Any]]:
    """Run the job (all partitions in parallel) in a thread; yield summaries as partition files appear."""
    result: dict[str, Any] = {}

    def run() -> None:
        try:
            result["rows"] = job.collect()
        except Exception as exc:  # re-raised on the caller's thread
            result["error"] = exc

    th = threading.Thread(target=run, daemon=True)
    th.start()
    pending = {b[0]: b for b in todo}
    while pending:
        th.join(timeout=2.0)
        for part in [p for p in pending if _part_path(out, p).exists()]:
            yield _summarise_file(_part_path(out, part), *pending.pop(part))
        if not th.is_alive():
            break
    if "error" in result:
        raise result["error"]
    for row in result.get("rows", []):  # partitions that finished between the last poll and the end
        if row["part"] in pending:
            pending.pop(row["part"])
            yield row


def _read_manifest(out: Path) -> dict[str, Any] | None:
    p = out / MANIFEST
    return json.loads(p.read_text()) if p.exists() else None


def _manifest(seed, n_traces, n_parts, cfg, summaries, elapsed, new_parts, old) -> dict[str, Any]:
    parts = [summaries[p] for p in sorted(summaries)]
    total = sum(s["n"] for s in parts)
    by_type: dict[str, int] = {}
    for s in parts:
        for k, v in s["by_type"].items():
            by_type[k] = by_type.get(k, 0) + v
    runs = list((old or {}).get("runs", []))
    new_traces = sum(summaries[p]["n"] for p in new_parts)
    runs.append(
        {
            "generated_partitions": len(new_parts),
            "generated_traces": new_traces,
            "seconds": round(elapsed, 1),
            "traces_per_second": round(new_traces / elapsed, 1) if elapsed > 0 and new_traces else None,
            "finished_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        }
    )
    return {
        "format": "adaptstream.costmodel traces, JSON lines, labels origin=simulated",
        "seed": seed,
        "n_traces": n_traces,
        "partitions": n_parts,
        "complete": total == n_traces,
        "traces_written": total,
        "backpressure_share": round(sum(s["backpressure"] for s in parts) / max(total, 1), 4),
        "failed_share": round(sum(s["failed"] for s in parts) / max(total, 1), 4),
        "oom": sum(s["oom"] for s in parts),
        "no_output": sum(s["no_output"] for s in parts),
        "by_query_type": dict(sorted(by_type.items())),
        "sim_config": cfg,
        "runs": runs,
        "parts": parts,
    }
