"""``adaptstream bench mapdevice``: LMStream's MapDevice against all-CPU and all-GPU operator mappings.

Runs the operator chains of :mod:`adaptstream.devices.pipeline` over generated data outside Spark, on this machine's
CPU and (where CuPy sees a CUDA GPU) its GPU:

* **sweep** (LMStream Fig. 5 shape): a synthetic select-project-join-aggregate-sort chain over partition sizes from
  a few KB to tens of MB; per size the time of all-CPU, all-GPU, every "one operator on the CPU, the rest on the
  GPU" mapping, MapDevice's mapping at its initial inflection point, and the best of all 2^n mappings (measured);
* **streams**: the Table III chains (LR2S, CM1S, CM1T, CM2S) batch after batch at several partition sizes under
  `cpu`, `gpu` and `mapdevice` (whose inflection point is re-estimated after every batch, Eq. 10): mean and max
  processing time per batch, host<->device transitions per batch, and the inflection point over time.

Without a GPU every GPU figure is recorded as not measured. Writes mapdevice.json / .md / .png to ``--out``
(default runs/bench-mapdevice-<time>/; ``--update-docs`` writes docs/results/).
"""

from __future__ import annotations

import itertools
import statistics
import time
from typing import Annotated, Any

import numpy as np
import pyarrow as pa
import typer

SIZES_KB = (4, 16, 64, 256, 1024, 4096, 16384, 65536)
STREAM_ROWS = (1_000, 10_000, 100_000, 1_000_000)
POLICIES = ("cpu", "gpu", "mapdevice")


def synthetic(rows: int, seed: int = 0) -> tuple[pa.Table, list]:
    """Fig. 5's synthetic query: filter, project, join with a dimension table, aggregate, sort."""
    from adaptstream.devices.operators import Aggregate, Filter, Join, Project, Sort

    rng = np.random.default_rng(seed)
    t = pa.table(
        {
            "k": rng.integers(0, 1_000, rows).astype(np.int64),
            "v": rng.normal(50.0, 20.0, rows),
            "ts": np.arange(rows, dtype=np.int64),
        }
    )
    dim = pa.table({"k": np.arange(0, 1_000, dtype=np.int64), "region": np.arange(1_000, dtype=np.int64) % 16})
    ops = [
        Filter("v", ">", 20.0),
        Project(("k", "ts"), (("w", "v", 1.5, 2.0),)),
        Join("k", dim),
        Aggregate(("region",), "w"),
        Sort("sum_w", descending=True),
    ]
    return t, ops


def _time(t: pa.Table, ops: list, devices: list[str], repeats: int) -> float:
    from adaptstream.devices.pipeline import run_chain

    return statistics.median(run_chain(t, ops, devices).seconds for _ in range(repeats))


def sweep(gpu: bool, repeats: int, sizes_kb: tuple[int, ...], say) -> list[dict]:
    from adaptstream.devices import build_device_mapper
    from adaptstream.devices.pipeline import plan_of

    out = []
    probe, _ = synthetic(1_000)
    row_bytes = probe.nbytes / probe.num_rows
    for kb in sizes_kb:
        rows = max(16, int(kb * 1024 / row_bytes))
        t, ops = synthetic(rows, seed=kb)
        n = len(ops)
        md = build_device_mapper("mapdevice").map(plan_of(ops), float(t.nbytes))
        row: dict[str, Any] = {"kb": kb, "rows": rows, "bytes": t.nbytes, "mapdevice_devices": md}
        row["cpu_s"] = _time(t, ops, ["cpu"] * n, repeats)
        if gpu:
            row["gpu_s"] = _time(t, ops, ["gpu"] * n, repeats)
            row["one_cpu_s"] = {
                ops[i].name: _time(t, ops, ["cpu" if j == i else "gpu" for j in range(n)], repeats) for i in range(n)
            }
            row["mapdevice_s"] = _time(t, ops, md, repeats)
            every = {
                m: _time(t, ops, list(m), max(1, repeats // 2)) for m in itertools.product(("cpu", "gpu"), repeat=n)
            }
            best = min(every, key=every.__getitem__)
            row["best_devices"], row["best_s"] = list(best), every[best]
        say(
            f"  sweep {kb:>6} KB: cpu {row['cpu_s'] * 1e3:8.2f} ms"
            + (f"  gpu {row['gpu_s'] * 1e3:8.2f} ms" if gpu else "")
        )
        out.append(row)
    return out


def _batches(gen_name: str, rows: int, count: int, seed: int) -> list[pa.Table]:
    """``count`` partitions of ``rows`` rows from consecutive generator seconds (cycled when the rows are many)."""
    from adaptstream.workloads import build_generator

    g = build_generator(gen_name, seed=seed)
    distinct = max(1, min(count, 4_000_000 // rows))
    pool = [g.generate(k, rows) for k in range(distinct)]
    return [pool[i % distinct] for i in range(count)]


class StreamRun:
    """One policy's run of a query over a sequence of batches."""

    def __init__(self, name: str, rows: int, policy: str, slide: float) -> None:
        from adaptstream.devices import build_device_mapper
        from adaptstream.devices.pipeline import CHAINS, MappedQuery

        params = {"slide": slide} if policy == "mapdevice" else {}
        self.q = MappedQuery(CHAINS[name].build(), build_device_mapper(policy, **params))
        self.rec: dict[str, Any] = {"query": name, "rows": rows, "policy": policy}
        self.rec.update(times_s=[], transitions=[], mappings=[], inflection=[])

    def step(self, b: pa.Table) -> None:
        run = self.q.process(b)
        self.q.report(run, b.num_rows, run.seconds, float(b.nbytes))
        self.rec["times_s"].append(run.seconds)
        self.rec["transitions"].append(run.transitions)
        self.rec["mappings"].append("".join(d[0] for d in run.devices))
        self.rec["inflection"].append(self.q.mapper.inflection_point)

    def finish(self, batches: list[pa.Table]) -> dict:
        self.q.close()
        return {**self.rec, "bytes": int(np.mean([b.nbytes for b in batches]))}


def streams(gpu: bool, batches: int, rows_list: tuple[int, ...], say) -> list[dict]:
    """Every policy runs the same batches, interleaved batch by batch (rotating which policy goes first), so that a
    slow phase of the machine falls on all of them alike."""
    from adaptstream.devices.pipeline import CHAINS
    from adaptstream.workloads import WORKLOADS

    out = []
    pols = POLICIES if gpu else ("cpu",)
    for name, chain in CHAINS.items():
        slide = WORKLOADS.get(name).lmstream_slide
        for rows in rows_list:
            data = [chain.scan(b) for b in _batches(chain.generator, rows, batches, seed=3)]
            runs = {p: StreamRun(name, rows, p, slide) for p in pols}
            for i, b in enumerate(data):
                for k in range(len(pols)):
                    runs[pols[(i + k) % len(pols)]].step(b)
            for p in pols:
                r = runs[p].finish(data)
                out.append(r)
                say(f"  {name} {rows:>9,} rows {p:9s} mean {np.mean(r['times_s'][2:]) * 1e3:9.2f} ms")
    return out


def warm_up(gpu: bool) -> None:
    """First calls pay one-off costs (CuPy compiles each kernel on first use, pyarrow's first join and group-by):
    run every chain once on every device, unmeasured."""
    from adaptstream.devices.pipeline import CHAINS, run_chain

    t, ops = synthetic(5_000)
    run_chain(t, ops, ["cpu"] * len(ops))
    if not gpu:
        return
    run_chain(t, ops, ["gpu"] * len(ops))
    for chain in CHAINS.values():
        data = chain.scan(_batches(chain.generator, 5_000, 1, seed=1)[0])
        ops = chain.build()
        run_chain(data, ops, ["gpu"] * len(ops))


def gpu_name() -> str | None:
    from adaptstream.devices.operators import gpu_available

    if not gpu_available():
        return None
    import cupy

    props = cupy.cuda.runtime.getDeviceProperties(0)
    return props["name"].decode() if isinstance(props["name"], bytes) else str(props["name"])


def positive_ints(text: str, option: str) -> tuple[int, ...]:
    """A comma-separated option of positive integers; anything else is a usage error naming the option."""
    from adaptstream.errors import ConfigError

    try:
        values = tuple(int(x) for x in text.split(",") if x.strip())
    except ValueError:
        values = ()
    if not values or min(values) < 1:
        msg = f"{option} takes comma-separated positive integers, got {text!r}"
        raise ConfigError(msg)
    return values


def mapdevice_command(
    out: Annotated[
        str | None, typer.Option(metavar="DIR", help="where the report goes [default: runs/bench-mapdevice-<time>]")
    ] = None,
    update_docs: Annotated[bool, typer.Option("--update-docs", help="write the report in docs/results")] = False,
    batches: Annotated[int, typer.Option(min=22, help="batches per query, size and policy")] = 60,
    repeats: Annotated[int, typer.Option(min=1, help="timed repeats per sweep point (median)")] = 5,
    sizes_kb: Annotated[str, typer.Option(help="sweep partition sizes in KB")] = ",".join(map(str, SIZES_KB)),
    rows: Annotated[str, typer.Option(help="rows per partition of the stream runs")] = ",".join(map(str, STREAM_ROWS)),
) -> None:
    """MapDevice vs all-CPU vs all-GPU: a data-size sweep (Fig. 5 shape) and the Table III chains batch after batch."""
    from adaptstream.outdirs import report_dir
    from adaptstream_bench.mapdevice_report import write_report
    from adaptstream_bench.meta import finish_meta, sample_load, start_meta

    target = report_dir("bench-mapdevice", out, update_docs, report="mapdevice.json")
    sizes = positive_ints(sizes_kb, "--sizes-kb")
    rows_list = positive_ints(rows, "--rows")
    name = gpu_name()
    meta = start_meta("bench", "mapdevice", batches=batches, repeats=repeats, gpu=name)
    say = typer.echo
    say(f"bench mapdevice: GPU {name or 'none (GPU columns: not measured)'}")
    t0 = time.perf_counter()
    warm_up(name is not None)
    sw = sweep(name is not None, repeats, sizes, say)
    sample_load(meta)
    st = streams(name is not None, batches, rows_list, say)
    sample_load(meta)
    meta["bench_s"] = time.perf_counter() - t0
    write_report({"meta": finish_meta(meta), "sweep": sw, "streams": st}, target)
    say(f"bench mapdevice: report in {target / 'mapdevice.md'}")


if __name__ == "__main__":
    typer.run(mapdevice_command)
