"""`adaptstream costmodel ...` data commands of the harness: the simulated corpus, real traces, the REAL testbed."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Annotated, Any

import typer

from adaptstream.errors import AdaptstreamError

DEFAULT_HOSTS = "small,medium,large"

app = typer.Typer(
    help="Cost-model data: simulated trace corpus, real Structured Streaming traces, the real testbed.",
    no_args_is_help=True,
)


@app.command()
def corpus(
    out: Annotated[Path, typer.Option(help="corpus directory")] = Path("data/costmodel_corpus"),
    n: Annotated[int, typer.Option(help="number of traces")] = 40_000,
    seed: Annotated[int, typer.Option(help="corpus seed; trace i depends only on (seed, i)")] = 0,
    master: Annotated[str, typer.Option(help="Spark master URL")] = "local[2]",
    partitions: Annotated[int, typer.Option(help="partitions (0 = one per 500 traces)")] = 0,
) -> None:
    """Generate (or resume) a corpus of SIMULATED traces on Spark, printing each finished partition."""
    from adaptstream_bench.costmodel.simcorpus import build_corpus

    t0 = time.time()

    def show(s: dict, done: int, total: int) -> None:
        typer.echo(f"[{time.time() - t0:7.1f}s] partition {s['part']} ({s['n']} traces) {done}/{total}")

    try:
        m = build_corpus(out, n, seed=seed, master=master, partitions=partitions or None, progress=show)
    except AdaptstreamError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from None
    summary = {k: v for k, v in m.items() if k not in ("parts", "sim_config")}
    typer.echo(json.dumps(summary, indent=2))


@app.command("record-real")
def record_real_cmd(
    out: Annotated[Path, typer.Option(help="JSON-lines output")] = Path("data/real_traces.jsonl"),
    n: Annotated[int, typer.Option(help="number of queries")] = 20,
    seed: Annotated[int, typer.Option()] = 0,
    duration: Annotated[float, typer.Option(help="seconds per query")] = 24.0,
    warmup: Annotated[float, typer.Option(help="seconds ignored at the start of each query")] = 6.0,
) -> None:
    """Run generated queries as Structured Streaming queries on this machine and record REAL traces."""
    from adaptstream_bench.costmodel.realtraces import record_real

    try:
        written = record_real(out, n=n, seed=seed, duration_s=duration, warmup_s=warmup)
    except AdaptstreamError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from None
    typer.echo(f"wrote {written} real traces to {out}")


@app.command("testbed")
def testbed_cmd(
    hosts: Annotated[str, typer.Option(help="host categories in order, e.g. small,medium,large or small:cpu=30")] = (
        "small,medium,large"
    ),
    seconds: Annotated[float, typer.Option(help="keep it up this long (0 = until Ctrl-C / SIGTERM)")] = 0.0,
    workdir: Annotated[
        Path | None, typer.Option(help="directory for logs and the ledger (default: a temp dir)")
    ] = None,
) -> None:
    """Start the REAL heterogeneous testbed (root): master + one confined worker per host; removed on exit."""
    from adaptstream_bench.costmodel.testbed.cluster import Testbed
    from adaptstream_bench.costmodel.testbed.hosts import parse_hosts

    specs = parse_hosts(hosts)
    with Testbed(specs, workdir=workdir) as tb:
        typer.echo(
            json.dumps(
                {
                    "master": tb.master_url,
                    "driver_host": tb.driver_host,
                    "dir": str(tb.dir),
                    "hosts": [
                        {
                            **h.to_dict(),
                            "addr": tb.addr[h.name],
                            "netns": tb.netns(h.name),
                            "cgroup": tb.cgroup(h.name),
                            "rtt_ms": tb.rtt_ms[h.name],
                        }
                        for h in specs
                    ],
                },
                indent=1,
            ),
            nl=True,
        )
        try:
            deadline = time.monotonic() + seconds if seconds > 0 else float("inf")
            while time.monotonic() < deadline:
                time.sleep(min(1.0, max(0.0, deadline - time.monotonic())))
        except KeyboardInterrupt:
            pass
    typer.echo("testbed removed")


@app.command("testbed-down")
def testbed_down(
    ledger: Annotated[Path, typer.Argument(help="ledger.json of a testbed whose process died")],
) -> None:
    """Remove what a crashed testbed left (its processes, cgroups, namespaces, links), as listed in its ledger."""
    from adaptstream.errors import ConfigError
    from adaptstream_bench.costmodel.testbed import system

    if not ledger.is_file():
        msg = f"ledger {ledger} does not exist"
        raise ConfigError(msg)
    system.check_support()
    problems = system.teardown(system.Ledger(ledger))
    if problems:
        raise AdaptstreamError("; ".join(problems))
    typer.echo("removed")


@app.command("testbed-corpus")
def testbed_corpus(
    out: Annotated[Path, typer.Option(help="JSON-lines output; trace ids already in it are skipped")] = Path(
        "data/costmodel_real_testbed.jsonl"
    ),
    n: Annotated[int, typer.Option(help="trace ids 0..n-1 (pairs: random placement, initial placement)")] = 40,
    start: Annotated[
        int, typer.Option(help="run only trace ids start..n-1 (e.g. --repeat of the later corpus traces)")
    ] = 0,
    seed: Annotated[int, typer.Option()] = 0,
    hosts: Annotated[
        str, typer.Option(help="testbed host categories; another set than the default gets ids tagged with it")
    ] = DEFAULT_HOSTS,
    duration: Annotated[float, typer.Option(help="seconds per run")] = 30.0,
    warmup: Annotated[float, typer.Option(help="seconds ignored at the start of a run")] = 10.0,
    budget_min: Annotated[float, typer.Option(help="stop starting runs after this many minutes")] = 25.0,
    chooser: Annotated[
        str | None,
        typer.Option(
            help="Exp. 2 instead of the corpus: pairs of initial placement and the placement this model (gnn or "
            "flat, from --models) chooses, or a random valid one (random, the baseline), for queries --first-query "
            "onwards; several, comma-separated (e.g. gnn,flat,random, with --label), run side by side: per query "
            "the initial placement, then each chooser's (--n = queries x (choosers + 1))"
        ),
    ] = None,
    models: Annotated[
        Path, typer.Option(help="models written by `costmodel eval-real` (its models/ directory)")
    ] = Path("runs/costmodel_real/models"),
    first_query: Annotated[int, typer.Option(help="with --chooser: the first generator query (unseen ones)")] = 1000,
    target: Annotated[str, typer.Option(help="with --chooser: proc-latency, e2e-latency or throughput")] = (
        "proc-latency"
    ),
    label: Annotated[
        str | None,
        typer.Option(
            help="with --chooser: the name its runs are recorded under (default: the chooser's name); give a new "
            "one when the model changed, so its runs are not mixed with an older model's"
        ),
    ] = None,
    types: Annotated[
        str | None,
        typer.Option(
            help="only queries of these types, e.g. 2-way-join,3-way-join (any variant) or 3-way-join+agg (both "
            "traces of each pair; with --chooser its queries from --first-query on)"
        ),
    ] = None,
    repeat: Annotated[
        bool,
        typer.Option(
            "--repeat",
            help="run corpus traces --start..n-1 again (same query, hosts and placement; ids tbr-...) to measure how "
            "much a real label varies between two runs (write them to their own --out)",
        ),
    ] = False,
    rerun_failed: Annotated[
        bool,
        typer.Option(
            "--rerun-failed",
            help="run the corpus traces in --out whose run failed (no sink rows) again, for a longer --duration "
            "(ids tbl-...): `eval-real --success-rule rerun` counts those that succeed then as successes; with "
            "--repeat, the failed repeat runs (tbr-...) instead (ids tbrl-...), so that `costmodel repeatability` "
            "can judge both runs of a pair by that rule",
        ),
    ] = False,
) -> None:
    """Run generated queries under placements on the REAL testbed (root) and append REAL traces (resumable)."""
    from adaptstream.errors import ConfigError
    from adaptstream_bench.costmodel.testbed.corpus import chosen_placer, compare_placer, run_corpus
    from adaptstream_bench.costmodel.testbed.hosts import host_tag, parse_hosts

    specs = parse_hosts(hosts)
    # another host set than the default: its own ids, so resuming never mixes host sets
    tag = "" if specs == parse_hosts(DEFAULT_HOSTS) else "." + host_tag(specs)
    if duration <= warmup or warmup < 0:
        msg = f"--duration ({duration}) must exceed --warmup ({warmup}) >= 0"
        raise ConfigError(msg)
    placer, prefix = None, "tb"
    if repeat and chooser is not None:
        msg = "--repeat reruns corpus traces; it does not take --chooser"
        raise ConfigError(msg)
    if rerun_failed and chooser is not None:
        msg = "--rerun-failed reruns corpus traces; it does not take --chooser"
        raise ConfigError(msg)
    if repeat:
        prefix = "tbr"
    if not 0 <= start < n:
        msg = f"--start ({start}) must be >= 0 and below --n ({n})"
        raise ConfigError(msg)
    only = None if start == 0 else list(range(start, n))
    if label is not None and chooser is None:
        msg = "--label goes with --chooser"
        raise ConfigError(msg)
    names = [c.strip() for c in chooser.split(",") if c.strip()] if chooser is not None else []
    per = max(2, len(names) + 1)  # runs per query: the corpus' pair, or the initial one and one per chooser
    if len(names) > 1 and label is None:
        msg = "several choosers run side by side need a --label (their runs are recorded as <label>-<chooser>)"
        raise ConfigError(msg)
    if len(set(names)) < len(names):
        msg = f"--chooser names a chooser twice: {chooser!r}"
        raise ConfigError(msg)
    if types is not None:
        first = first_query if chooser is not None else 0
        only = [i for i in _pairs_of_types(seed, first, n, types, per) if i >= start]
    if rerun_failed:
        among = [i for i in (only if only is not None else range(n)) if i >= start]
        # a failed repeat run gets its own longer run: the corpus run's rerun (tbl-) is another, independent one
        only = _failed_to_rerun(out, f"{prefix}{tag}-{seed}", duration, among)
        prefix = "tbrl" if repeat else "tbl"
    if chooser is not None:
        name = label or chooser
        if not name.replace("-", "").replace("_", "").isalnum():
            msg = f"--label must be letters, digits, - or _, got {name!r}"
            raise ConfigError(msg)
        if len(names) > 1:
            preds = {c: _load_chooser(c, models) for c in names}
            placer = compare_placer(seed, first_query, preds, name, target)
            if n % per:
                typer.echo(f"note: --n {n} is not a multiple of {per}: the last query runs without every chooser")
        else:
            placer = chosen_placer(seed, first_query, _load_chooser(chooser, models), name, target)
        prefix = "tbx" + name
    prefix += tag
    out.parent.mkdir(parents=True, exist_ok=True)
    written = run_corpus(
        out,
        n,
        seed,
        specs,
        duration_s=duration,
        warmup_s=warmup,
        budget_s=budget_min * 60,
        log=lambda s: typer.echo(s),
        placer=placer,
        id_prefix=prefix,
        only=only,
    )
    typer.echo(f"wrote {written} real traces to {out}")


def _failed_to_rerun(out: Path, stem: str, duration: float, among: list[int]) -> list[int]:
    """Indices (of `among`) of the corpus traces `<stem>-<i>` in `out` that failed; a clear error when there is
    nothing to rerun or --duration is not longer than the runs being rerun."""
    from adaptstream.costmodel.model import read_traces
    from adaptstream.errors import ConfigError

    wanted = {f"{stem}-{i:05d}": i for i in among}
    failed = [
        t
        for t in (read_traces(out) if out.exists() else [])
        if t.trace_id in wanted and t.labels is not None and t.labels.success is False
    ]
    if not failed:
        span = f"ids {min(among)}..{max(among)}" if among else "no ids selected"
        msg = f"no failed runs ({stem}-*, {span}) in {out} to rerun"
        raise ConfigError(msg)
    longest = max(float(t.meta.get("duration_s", 0.0)) for t in failed)
    if duration <= longest:
        msg = f"--rerun-failed needs a --duration longer than the failed runs' ({longest:g} s), e.g. {2 * longest:g}"
        raise ConfigError(msg)
    return sorted(wanted[t.trace_id] for t in failed)


def _pairs_of_types(seed: int, first_query: int, n: int, types: str, per: int = 2) -> list[int]:
    """Trace indices (groups per*k .. per*k+per-1: the corpus' pairs with first_query 0, Exp. 2's pairs or, with
    several choosers, groups) whose query, first_query + k, has one of the types: a base type (any variant) or a
    full one such as 3-way-join+agg."""
    from adaptstream.costmodel.generate import BASE_TYPES, base_type
    from adaptstream.errors import ConfigError
    from adaptstream_bench.costmodel.testbed.corpus import query_for
    from adaptstream_bench.costmodel.testbed.placement import realise

    valid = [*BASE_TYPES, *(f"{t}+agg" for t in BASE_TYPES)]
    want = {t.strip() for t in types.split(",") if t.strip()}
    if not want or want - set(valid):
        msg = f"--types takes query types from: {', '.join(valid)}; got {types!r}"
        raise ConfigError(msg)
    keep = []
    for k in range(-(-n // per)):
        q, _ = realise(query_for(seed, first_query + k))
        if q.query_type in want or base_type(q.query_type) in want:
            keep += [i for i in range(per * k, per * k + per) if i < n]
    return keep


def _load_chooser(name: str, models: Path) -> Any:
    """The placement predictor saved by `costmodel eval-real` (trained on every real corpus trace); None for
    `random`, the baseline that draws one valid placement per query."""
    from adaptstream.errors import ConfigError

    if name not in ("gnn", "flat", "random"):
        msg = f"unknown --chooser {name!r}; valid choices: gnn, flat, random"
        raise ConfigError(msg)
    if name == "random":
        return None
    path = models / name
    if not path.is_dir():
        msg = f"no {name} models in {path}; run `adaptstream costmodel eval-real` first (it writes them)"
        raise ConfigError(msg)
    if name == "gnn":
        from adaptstream.costmodel.ensemble import CostEnsembles

        return CostEnsembles.load(path)
    from adaptstream.costmodel.flat import FlatVectorModel

    return FlatVectorModel.load(path)
