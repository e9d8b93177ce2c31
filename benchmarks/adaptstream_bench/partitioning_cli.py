"""`adaptstream partitioning bench ...`: the partitioning benchmarks, added to the core's `partitioning` group."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

bench_app = typer.Typer(
    no_args_is_help=True,
    help="Partitioning benchmarks; reports go to runs/<name>-<time>/ "
    "unless --out DIR or --update-docs (docs/results/) is given.",
)
OutDir = Annotated[
    Path | None,
    typer.Option("--out", metavar="DIR", help="report directory [default: runs/partitioning-<bench>-<time>]"),
]
UpdateDocs = Annotated[bool, typer.Option("--update-docs", help="regenerate the committed report in docs/results/")]


def _out(bench: str, out: Path | None, update_docs: bool, report: str | None = None) -> Path:
    from adaptstream.outdirs import report_dir

    return report_dir(f"partitioning-{bench}", out, update_docs, report=report)


def _csv(value: str) -> list[str]:
    return [v.strip() for v in value.split(",") if v.strip()]


Master = Annotated[
    str, typer.Option("--master", help="Spark master: local[N], or a standalone cluster's spark://HOST:PORT")
]
ReportOnly = Annotated[
    bool, typer.Option("--report-only", help="re-render the Markdown/PNG from the report's JSON, run nothing")
]


def _bench(bench: str, out: Path | None, update_docs: bool, master: str, report_only: bool, run) -> None:
    """Run a benchmark into its report directory, or with --report-only re-render the report from its JSON."""
    from adaptstream.errors import ConfigError
    from adaptstream_bench.partitioning import render
    from adaptstream_bench.partitioning_spark import stem

    out_dir = _out(bench, out, update_docs, None if report_only else f"{stem(bench, master)}.json")
    if report_only:
        path = out_dir / f"{stem(bench, master)}.json"
        if not path.exists():
            raise ConfigError(f"--report-only: no {path} to render (run the benchmark first)")
        typer.echo(render(path))
        return
    typer.echo(run(out_dir))


@bench_app.command("metrics")
def metrics_command(
    rows: int = 200_000,
    blocks: int = 8,
    out: OutDir = None,
    update_docs: UpdateDocs = False,
    report_only: ReportOnly = False,
) -> None:
    """(a) Prompt Fig 10: BSI/hash, BCI/shuffle, KSR, Gamma on SynD z-sweep, TPC-H, DEBS, GCM (no Spark)."""
    from adaptstream_bench.partitioning import bench_metrics

    _bench(
        "metrics",
        out,
        update_docs,
        "local",
        report_only,
        lambda out_dir: bench_metrics(rows=rows, num_blocks=blocks, out_dir=out_dir),
    )


@bench_app.command("cost")
def cost_command(
    rows: int = 1_000_000,
    blocks: str = "8,16,32",
    out: OutDir = None,
    update_docs: UpdateDocs = False,
    report_only: ReportOnly = False,
) -> None:
    """(b) cost per tuple and memory, exact vs HyperLogLog; Prompt's work at the cut."""
    from adaptstream_bench.partitioning import bench_cost

    _bench(
        "cost",
        out,
        update_docs,
        "local",
        report_only,
        lambda out_dir: bench_cost(rows=rows, blocks=[int(b) for b in _csv(blocks)], out_dir=out_dir),
    )


@bench_app.command("rate")
def rate_command(
    partitioners: str = "time,shuffle,hash,pk2,cam,prompt",
    intervals: str = "1,2,3",
    zs: str = "0.5,1.5,2.0",
    blocks: int = 2,
    steps: int = 4,
    lo: float = 20_000,
    hi: float = 2_000_000,
    master: Master = "local[2]",
    out: OutDir = None,
    update_docs: UpdateDocs = False,
    report_only: ReportOnly = False,
) -> None:
    """(c) Prompt Fig 11: highest sustainable rate per partitioner with real Spark (bounded search)."""
    from adaptstream_bench.partitioning_spark import bench_rate

    _bench(
        "rate",
        out,
        update_docs,
        master,
        report_only,
        lambda out_dir: bench_rate(
            _csv(partitioners),
            [float(i) for i in _csv(intervals)],
            [float(z) for z in _csv(zs)],
            num_blocks=blocks,
            steps=steps,
            lo=lo,
            hi=hi,
            master=master,
            out_dir=out_dir,
        ),
    )


@bench_app.command("blocks")
def blocks_command(
    workloads: str = "tpch-q1,tpch-q3,debs-routes,gcm-q1,gcm-q2",
    partitioners: str = "shuffle,hash,pk2,pk5,cm,am,cam,lm,prompt",
    blocks: str = "2,4,8",
    rows: int = 400_000,
    repeats: int = 2,
    master: Master = "local[2]",
    out: OutDir = None,
    update_docs: UpdateDocs = False,
    report_only: ReportOnly = False,
) -> None:
    """(d) holistic Fig 5-7: Spark throughput vs number of blocks, aggregation load Gamma/|S|."""
    from adaptstream_bench.partitioning_spark import bench_blocks

    _bench(
        "blocks",
        out,
        update_docs,
        master,
        report_only,
        lambda out_dir: bench_blocks(
            _csv(workloads),
            _csv(partitioners),
            [int(b) for b in _csv(blocks)],
            rows=rows,
            repeats=repeats,
            master=master,
            out_dir=out_dir,
        ),
    )


@bench_app.command("all")
def all_command(out: OutDir = None, update_docs: UpdateDocs = False) -> None:
    """All four benchmarks with their default (bounded) settings, reports in one directory."""
    out_dir = _out("all", out, update_docs)
    metrics_command(out=out_dir)
    cost_command(out=out_dir)
    rate_command(out=out_dir)
    blocks_command(out=out_dir)
