"""The REAL corpus job: generated queries under placements on the testbed, measured labels, resumable.

Trace pair j (ids ``tb-<seed>-<2j>`` and ``tb-<seed>-<2j+1>``) runs query j of the Table II generator
(`QueryGenerator`, seeded by (seed, j)), realised for Spark (`placement.realise`), once under a random valid
placement (Fig. 5 rules, `sample_placement`) and once under the heuristic `initial_placement`, so the corpus
also holds the Exp. 2 baseline of every query. A trace id already in the output file is skipped.

Labels (origin="real"), from `duration_s` seconds of running, the first `warmup_s` ignored:
T = sink rows/s; Le / Lp = median over output rows (per-batch medians weighted by rows) of output time minus
the generation time (rate source timestamp) / ingestion time (micro-batch time at the source operator) of the
oldest input row involved; backpressure (rule `lag-or-stuck`, Costream's R > 0: some stream arrives faster than
it is processed) = some piece's median micro-batch duration in the second half exceeds the 1 s trigger, or a
piece that reads a source completed no micro-batch in the second half (stuck in one batch far past the trigger),
or a cross-host edge's lag (age of its oldest unread entry, sampled every 0.5 s while the query runs) grows by
more than 0.1 s per s over the measured span and ends above 2 s; success = the sink received rows and no piece
failed. The rules and how a trace recorded under an older one is judged by a newer one: testbed/bprules.py.

Traces recorded before 2026-11-26 carry the older rule (`meta.bp_rule` absent, "end-backlog"): an edge holding
more than 2 s of input unread after every piece was stopped. That count includes the batches an upstream piece
wrote after its consumer had stopped (1-3 s on most edges), so it marked runs that kept up as backpressured;
it is still recorded (`meta.backpressure_end_backlog`) beside the new rule for comparison. Traces recorded under
`lag-growth` (2026-11-26, before the evening) lack the stuck-piece clause; `meta.backpressure_lag_growth` keeps
that verdict in newer traces.
"""

from __future__ import annotations

import json
import os
import queue
import shutil
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from adaptstream.costmodel.generate import QueryGenerator, initial_placement, sample_placement
from adaptstream.costmodel.model import Host, Labels, Operator, QueryGraph, Trace, read_traces, write_traces
from adaptstream.errors import CostModelError, EnvironmentProblem
from adaptstream_bench.costmodel.testbed import system
from adaptstream_bench.costmodel.testbed.bprules import LATEST, stuck_pieces
from adaptstream_bench.costmodel.testbed.cluster import Testbed
from adaptstream_bench.costmodel.testbed.hosts import HostSpec
from adaptstream_bench.costmodel.testbed.placement import edge_key, pieces, realise
from adaptstream_bench.meta import git_dirty, git_revision

TRIGGER_MS = 1000.0
BP_RULE = LATEST
LAG_SAMPLE_S = 0.5
LAG_SLOPE = 0.1  # seconds of lag gained per second: over a tenth of the edge's arrivals left unread
LAG_END_S = 2.0  # a keeping-up edge's lag stays under about one trigger plus one consumer batch


class AgentProc:
    """One `agent.py` driver process pinned to a host; JSON lines over pipes."""

    def __init__(self, tb: Testbed, host: str, log: Path) -> None:
        conf = tb.app_conf(host)
        conf["spark.executor.extraJavaOptions"] = "-Xss16m " + conf["spark.executor.extraJavaOptions"]
        env = {**os.environ, "SPARK_LOCAL_IP": tb.driver_host, "PYTHONPATH": tb.pythonpath}
        self.log = log.open("ab")
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "adaptstream_bench.costmodel.testbed.agent",
                tb.master_url,
                json.dumps(conf),
                f"tb-{host}",
                str(log.with_suffix(".spark.log")),
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.log,
            text=True,
            env=env,
            start_new_session=True,
        )
        tb.ledger.add("pids", self.proc.pid)
        self.replies: queue.Queue[dict[str, Any]] = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if line.startswith("AGENT "):
                self.replies.put(json.loads(line[6:]))
        self.replies.put({"ok": False, "error": "agent exited", "dead": True})

    def send(self, cmd: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(cmd) + "\n")
        self.proc.stdin.flush()

    def reply(self, timeout: float) -> dict[str, Any]:
        try:
            return self.replies.get(timeout=timeout)
        except queue.Empty:
            return {"ok": False, "error": f"no reply within {timeout:.0f} s"}

    def close(self) -> None:
        try:
            self.send({"cmd": "exit"})
            self.proc.wait(timeout=60)
        except (OSError, subprocess.TimeoutExpired, ValueError):
            system.stop_pids([self.proc.pid])
        self.log.close()


def check_redis() -> None:
    """Placed queries need a Redis server binary and the redis Python client (cross-host edges)."""
    if shutil.which("redis-server") is None:
        msg = "redis-server is missing (cross-host edges of placed queries); install it: apt-get install redis-server"
        raise EnvironmentProblem(msg)
    try:
        import redis  # noqa: F401
    except ImportError:
        msg = "the redis Python client is missing; pip install 'adaptstream[testbed]' (or pip install redis)"
        raise EnvironmentProblem(msg) from None


def query_for(seed: int, j: int) -> QueryGraph:
    rng = np.random.default_rng([seed, j])
    return QueryGenerator().sample(rng, query_id=f"tbq-{seed}-{j}")


def _as_generated(q: QueryGraph) -> QueryGraph:
    """`q` with every aggregation's selectivity back at the generator's figure (`selectivity_generated`)."""
    ops = []
    for op in q.operators:
        f = dict(op.features)
        if op.kind == "window_agg" and "selectivity_generated" in f:
            f["selectivity"] = f.pop("selectivity_generated")
        ops.append(Operator(op.id, op.kind, f))
    return QueryGraph(q.query_id, tuple(ops), q.edges)


def redescribe(t: Trace) -> Trace:
    """`t` with its query as `realise` now describes it (aggregations: Def. 8's selectivity, `agg_selectivity`).

    Why: traces recorded before 2026-11-29 carry the generator's aggregation selectivity. The query is rebuilt
    from its generator (`meta.seed`, `meta.query_index`), so the execution parameters are those that ran; every
    feature but an aggregation's selectivity must equal the recorded one, else the trace is refused."""
    fresh, _ = realise(query_for(int(t.meta["seed"]), int(t.meta["query_index"])))
    if _as_generated(fresh) != _as_generated(t.query):
        where = f"generator query {t.meta['query_index']} of seed {t.meta['seed']}"
        msg = f"trace {t.trace_id}: its query does not match {where}"
        raise CostModelError(msg)
    return replace(t, query=fresh)


def _load() -> float:
    return os.getloadavg()[0]


def labels_from(
    result: dict[str, Any],
    t0: float,
    t1: float,
    warmup_s: float,
    pieces_meta: Sequence[Mapping[str, Any]] = (),
    source_ops: Iterable[str] = (),
) -> tuple[Labels, dict[str, Any]]:
    """Labels from the agents' stop replies (see the module docstring); `pieces_meta` (host, piece, ops) and the
    query's source operators find the pieces stuck in one batch (bprules.stuck_pieces)."""
    sink = [b for b in result["sink"] if b["t"] >= t0 + warmup_s]
    rows = sum(b["n"] for b in sink)
    span = max(1e-6, t1 - (t0 + warmup_s))

    def wmedian(key: str) -> float | None:
        if not sink:
            return None
        vals = sorted((b[key] * 1000.0, b["n"]) for b in sink)
        half, acc = rows / 2.0, 0
        for v, n in vals:
            acc += n
            if acc >= half:
                return round(v, 2)
        return round(vals[-1][0], 2)

    slow = {}
    for name, pc in result["pieces"].items():
        mid = t0 + (t1 - t0) / 2
        durs = [b["ms"] for b in pc["batches"] if b["ms"] is not None and _epoch(b["ts"]) >= mid]
        slow[name] = statistics.median(durs) if durs else None
    growth = {k: lag_growth(v, t0 + warmup_s) for k, v in result.get("lag_samples", {}).items()}
    lagging = [k for k, (slope, end) in growth.items() if slope > LAG_SLOPE and end > LAG_END_S]
    after_stop = [k for k, v in result["backlog_s"].items() if v > 2.0]
    slow_piece = any(v is not None and v > TRIGGER_MS for v in slow.values())
    stuck = stuck_pieces(pieces_meta, slow, source_ops)
    bp = slow_piece or bool(lagging) or bool(stuck)
    errors = [pc["exception"] for pc in result["pieces"].values() if pc["exception"]] + result["errors"]
    success = rows > 0 and not errors and any(b["n"] for b in result["sink"])
    labels = Labels(
        throughput=round(rows / span, 3),
        e2e_latency_ms=wmedian("le"),
        proc_latency_ms=wmedian("lp"),
        backpressure=bool(bp),
        success=bool(success),
        origin="real",
    )
    detail = {
        "median_batch_ms_2nd_half": slow,
        "bp_rule": BP_RULE,
        "lag_growth": {k: {"slope": round(a, 3), "end_s": round(b, 2)} for k, (a, b) in growth.items()},
        "lagging_edges": lagging,
        "stuck_pieces": stuck,
        "backpressure_lag_growth": slow_piece or bool(lagging),
        "lagging_edges_after_stop": after_stop,
        "backpressure_end_backlog": slow_piece or bool(after_stop),
        "errors": [e[:300] for e in errors],
        "sink_rows_after_warmup": rows,
        "sink_batches": len(result["sink"]),
    }
    return labels, detail


def lag_growth(samples: list[tuple[float, float]], t_from: float) -> tuple[float, float]:
    """(least-squares slope of an edge's lag in s/s, its mean lag over the last 2 s) from samples (time, lag) taken
    from `t_from` on; (0, 0) with fewer than three samples."""
    pts = np.array([(t, v) for t, v in samples if t >= t_from], dtype=float).reshape(-1, 2)
    if len(pts) < 3:
        return 0.0, 0.0
    slope = float(np.polyfit(pts[:, 0] - pts[0, 0], pts[:, 1], 1)[0])
    end = float(pts[pts[:, 0] >= pts[-1, 0] - 2.0, 1].mean())
    return slope, end


def sample_lags(rc: Any, keys: dict[str, str], until: float) -> dict[str, list[tuple[float, float]]]:
    """Every LAG_SAMPLE_S until `until` (epoch s): each edge's lag, for `lag_growth`."""
    from adaptstream_bench.costmodel.testbed.redisedge import edge_lag_s  # pyspark: only where a testbed runs

    out: dict[str, list[tuple[float, float]]] = {k: [] for k in keys}
    while (now := time.time()) < until:
        for tail, key in keys.items():
            out[tail].append((round(now, 3), round(edge_lag_s(rc, key, now), 3)))
        time.sleep(max(0.0, min(LAG_SAMPLE_S - (time.time() - now), until - time.time())))
    return out


def _epoch(ts: str | None) -> float:
    if not ts:
        return 0.0
    from datetime import datetime

    return datetime.fromisoformat(ts.replace("Z", "+00:00")).timestamp()


def run_trace(
    tb: Testbed,
    agents: dict[str, AgentProc],
    redis_addr: tuple[str, int],
    trace_id: str,
    query: QueryGraph,
    params: dict[str, Any],
    placement: dict[str, str],
    duration_s: float,
    warmup_s: float,
    workdir: Path,
) -> Trace:
    import redis

    ps = pieces(query, placement)
    upstream = {op.id: list(query.upstream(op.id)) for op in query.operators}
    ck = workdir / "ck" / trace_id
    by_host: dict[str, list[dict[str, Any]]] = {}
    for p in ps:
        by_host.setdefault(p["host"], []).append(p)
    load0 = _load()
    stat0 = {h.name: system.cgroup_stat(tb.cgroup(h.name)) for h in tb.hosts}
    errors: list[str] = []
    for host, hp in by_host.items():
        agents[host].send(
            {
                "cmd": "start",
                "trace": trace_id,
                "pieces": hp,
                "params": params,
                "upstream": upstream,
                "redis": list(redis_addr),
                "dir": str(ck / host),
            }
        )
    for host in by_host:
        r = agents[host].reply(180)
        if not r.get("ok"):
            errors.append(f"{host} start: {r.get('error')}")
    rc = redis.Redis(host=redis_addr[0], port=redis_addr[1])
    edges = {p["tail"]: edge_key(trace_id, p["tail"]) for p in ps if not p["sink"]}
    t0 = time.time()
    lags = sample_lags(rc, edges, t0 + duration_s)
    t1 = time.time()
    result: dict[str, Any] = {"pieces": {}, "sink": [], "errors": errors, "backlog_s": {}, "lag_samples": lags}
    for host in by_host:
        agents[host].send({"cmd": "stop", "trace": trace_id})
    for host in by_host:
        r = agents[host].reply(180)
        if not r.get("ok"):
            errors.append(f"{host} stop: {r.get('error')}")
            continue
        result["pieces"].update({f"{host}/{k}": v for k, v in r["pieces"].items()})
        result["sink"].extend(r["sink"])
    rates = _rates_out(query, params)
    for p in ps:
        if p["sink"]:
            continue
        key = edge_key(trace_id, p["tail"])
        entries: list[Any] = rc.xrange(key) or []  # redis-py types it as a sync/async union
        unread = sum(len(json.loads(f[b"b"])) for _i, f in entries)
        result["backlog_s"][p["tail"]] = round(unread / max(rates.get(p["tail"], 1.0), 1e-3), 2)
        rc.delete(key)
    shutil.rmtree(ck, ignore_errors=True)
    pieces_meta = [{k: p[k] for k in ("piece", "host", "ops", "sink")} for p in ps]
    sources = [op.id for op in query.operators if op.kind == "source"]
    labels, detail = labels_from(result, t0, t1, warmup_s, pieces_meta, sources)
    stat1 = {h.name: system.cgroup_stat(tb.cgroup(h.name)) for h in tb.hosts}
    throttled_s = {
        h: round((stat1[h].get("cpu_throttled_time", 0) - stat0[h].get("cpu_throttled_time", 0)) / 1e9, 2)
        for h in stat1
    }
    meta = {
        "testbed": "real (cgroups + netns on one machine, docs/testbed.md)",
        "duration_s": duration_s,
        "warmup_s": warmup_s,
        "trigger_ms": TRIGGER_MS,
        "pieces": pieces_meta,
        "load1_before": round(load0, 2),
        "load1_after": round(_load(), 2),
        "cpu_throttled_s": throttled_s,
        "backlog_s": result["backlog_s"],  # after every piece stopped: the older rule's input
        "lag_samples": {k: [[round(t - t0, 2), v] for t, v in vs] for k, vs in lags.items()},
        **detail,
    }
    hosts = [tb.host_record(h.name) for h in tb.hosts]
    return Trace(trace_id, query, tuple(hosts), placement, labels, meta)


def warm_up_agents(
    tb: Testbed,
    agents: dict[str, AgentProc],
    redis_addr: tuple[str, int],
    workdir: Path,
    log: Callable[[str], None],
    duration_s: float = 40.0,
) -> None:
    """Unrecorded runs so that every agent has run a source piece and a `tbredis` piece once: a fresh query's
    first micro-batch on a cold executor (Python workers, source runner) takes 10-30 s on this machine."""
    from adaptstream.costmodel.model import Operator

    names = [h.name for h in tb.hosts]
    q = QueryGraph(
        "warmup",
        (
            Operator("src0", "source", {"event_rate": 100.0, "tuple_width_out": 3}),
            Operator("flt1", "filter", {"selectivity": 0.5}),
            Operator("sink2", "sink", {}),
        ),
        (("src0", "flt1"), ("flt1", "sink2")),
    )
    q, params = realise(q)
    for shift in range(min(2, len(names))):
        pl = {op: names[(k + shift) % len(names)] for k, op in enumerate(("src0", "flt1", "sink2"))}
        t = run_trace(tb, agents, redis_addr, f"warmup{shift}", q, params, pl, duration_s, 0.0, workdir)
        log(f"warm-up {pl}: sink rows {t.meta['sink_rows_after_warmup']} (not recorded)")


def _rates_out(query: QueryGraph, params: dict[str, Any]) -> dict[str, float]:
    from adaptstream_bench.costmodel.testbed.placement import nominal_rates

    return nominal_rates(query, {k: float(v["rate"]) for k, v in params.items() if v["kind"] == "source"})


#: chooses trace i's query and placement: (query, params, placement, kind, extra meta)
Placer = Callable[[int, list[Host]], tuple[QueryGraph, dict[str, Any], dict[str, str], str, dict[str, Any]]]


def pair_placer(seed: int) -> Placer:
    """The corpus' default: trace i runs query i // 2, even i under a random valid placement, odd i under the
    heuristic initial placement (Exp. 2's baseline)."""

    def place(i: int, host_records: list[Host]) -> tuple[QueryGraph, dict[str, Any], dict[str, str], str, dict]:
        q, params = realise(query_for(seed, i // 2))
        if i % 2 == 0:
            return q, params, sample_placement(q, host_records, np.random.default_rng([seed, i, 1])), "random", {}
        return q, params, initial_placement(q, host_records), "initial", {}

    return place


def chosen_placer(seed: int, first_query: int, predictor: Any, name: str, target: str = "proc-latency") -> Placer:
    """Exp. 2 on the testbed: trace pair k runs query `first_query + k` of the generator (pick `first_query` past
    the training corpus, so the model has never seen the query) under the heuristic initial placement (even i)
    and under the placement the cost model `predictor` chooses for `target` (odd i; `PlacementOptimizer`,
    Costream Sec. V). With `predictor` None the odd run takes one random valid placement instead (Fig. 5 rules,
    drawn from the query's index): the chooser a model has to beat."""
    from adaptstream.costmodel.optimizer import PlacementOptimizer

    def place(i: int, host_records: list[Host]) -> tuple[QueryGraph, dict[str, Any], dict[str, str], str, dict]:
        j = first_query + i // 2
        q, params = realise(query_for(seed, j))
        init = initial_placement(q, host_records)
        extra: dict[str, Any] = {"query_index": j, "chooser": name, "target": target}
        if i % 2 == 0:
            return q, params, init, "initial", extra
        if predictor is None:
            chosen = sample_placement(q, host_records, np.random.default_rng([seed, j, 2]))
            return q, params, chosen, name, extra | {"same_as_initial": chosen == init}
        d = PlacementOptimizer(predictor, target, seed=j).optimize(q, host_records)
        extra |= {
            "predicted": {k: round(float(v), 3) for k, v in d.chosen.predictions.items()},
            "fallback": d.fallback,
            "n_candidates": d.n_candidates,
            "same_as_initial": d.chosen.placement == init,
        }
        return q, params, d.chosen.placement, name, extra

    return place


def compare_placer(
    seed: int, first_query: int, predictors: Mapping[str, Any], label: str, target: str = "proc-latency"
) -> Placer:
    """Exp. 2 with several choosers side by side on the same queries, in one invocation: with m choosers, runs
    k(m+1) .. k(m+1)+m take query `first_query + k`, first under the heuristic initial placement, then under each
    chooser's placement in the order given (`predictors`: name -> model, None for a random valid placement).
    Interleaving per query puts every chooser's run of a query under the same conditions of the machine. Each
    chooser run is recorded as `<label>-<name>` (meta `chooser`, `placement_kind`), all runs of the invocation
    carry `exp2_group` = label."""
    names = list(predictors)
    m = len(names)
    single = {
        name: chosen_placer(seed, first_query, pred, f"{label}-{name}", target) for name, pred in predictors.items()
    }

    def place(i: int, host_records: list[Host]) -> tuple[QueryGraph, dict[str, Any], dict[str, str], str, dict]:
        k, r = divmod(i, m + 1)
        # the single-chooser placer's pair k: even index = initial, odd = its chooser's placement
        q, params, placement, kind, extra = single[names[max(r - 1, 0)]](2 * k + (r > 0), host_records)
        extra = extra | {"exp2_group": label}
        if r == 0:
            return q, params, placement, kind, extra | {"chooser": label}
        return q, params, placement, kind, extra | {"chooser_model": names[r - 1]}

    return place


def run_corpus(
    out: Path,
    n: int,
    seed: int,
    hosts: list[HostSpec],
    duration_s: float = 30.0,
    warmup_s: float = 10.0,
    budget_s: float = 1500.0,
    log: Callable[[str], None] = print,
    only: list[int] | None = None,
    placer: Placer | None = None,
    id_prefix: str = "tb",
    agent_warm_up_s: float = 40.0,
) -> int:
    """Run traces 0..n-1 (or just `only`) not yet in `out` (JSON lines, appended one by one) until done or
    `budget_s` is spent; returns how many were written. Trace i is `placer(i, hosts)` (default: the pairs of
    `pair_placer`), its id `<id_prefix>-<seed>-<i>`. Before the first trace each agent runs unrecorded pieces
    for `agent_warm_up_s` (two runs)."""
    t_start = time.monotonic()
    place = placer or pair_placer(seed)
    done = {t.trace_id for t in read_traces(out)} if out.exists() else set()
    todo = [i for i in (only if only is not None else range(n)) if f"{id_prefix}-{seed}-{i:05d}" not in done]
    if not todo:
        log(f"all {n} traces already in {out}")
        return 0
    check_redis()
    written = 0
    # which code recorded the traces and in which invocation: a report can then tell one invocation from several
    invocation = {"git": git_revision(), "dirty": git_dirty(), "invocation_started": round(time.time(), 1)}
    with Testbed(hosts, pythonpath=os.environ.get("PYTHONPATH", "")) as tb:
        workdir = tb.dir
        import socket

        with socket.socket() as s:
            s.bind((tb.driver_host, 0))
            rport = s.getsockname()[1]
        system.spawn(
            tb.ledger,
            [
                "redis-server",
                "--bind",
                tb.driver_host,
                "--port",
                str(rport),
                "--save",
                "",
                "--appendonly",
                "no",
                "--protected-mode",
                "no",
            ],
            workdir / "logs" / "redis.log",
            dict(os.environ),
        )
        agents = {h.name: AgentProc(tb, h.name, workdir / "logs" / f"agent_{h.name}.log") for h in hosts}
        try:
            for name, a in agents.items():
                r = a.reply(300)
                if not r.get("ready"):
                    msg = f"agent for {name} did not start: {r.get('error')} (log {workdir}/logs/agent_{name}.log)"
                    raise EnvironmentProblem(msg)
            log(f"testbed up in {time.monotonic() - t_start:.0f} s: {tb.master_url}")
            host_records = [tb.host_record(h.name) for h in hosts]
            warm_up_agents(tb, agents, (tb.driver_host, rport), workdir, log, agent_warm_up_s)
            for i in todo:
                if time.monotonic() - t_start > budget_s:
                    log(f"budget of {budget_s:.0f} s spent; {written} traces written, resume to continue")
                    break
                q, params, placement, kind, extra = place(i, host_records)
                tid = f"{id_prefix}-{seed}-{i:05d}"
                started = round(time.time(), 1)
                t = run_trace(
                    tb, agents, (tb.driver_host, rport), tid, q, params, placement, duration_s, warmup_s, workdir
                )
                t = Trace(
                    t.trace_id,
                    t.query,
                    t.hosts,
                    t.placement,
                    t.labels,
                    {
                        **t.meta,
                        "seed": seed,
                        "index": i,
                        "query_index": i // 2,
                        "placement_kind": kind,
                        **extra,
                        **invocation,
                        "started": started,
                        "realised": "placement.realise (docs/testbed.md)",
                    },
                )
                with out.open("a") as fh:
                    fh.write(json.dumps(t.to_dict()) + "\n")
                written += 1
                lb = t.labels
                assert lb is not None
                log(
                    f"[{time.monotonic() - t_start:6.0f}s] {tid} {q.query_type:16s} {kind:7s} T={lb.throughput:.1f} "
                    f"Le={lb.e2e_latency_ms} Lp={lb.proc_latency_ms} bp={lb.backpressure} ok={lb.success} "
                    f"load={t.meta['load1_after']}"
                )
        finally:
            for a in agents.values():
                a.close()
    return written


__all__ = ["chosen_placer", "compare_placer", "pair_placer", "query_for", "run_corpus", "run_trace", "write_traces"]
