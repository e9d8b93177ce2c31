"""The simulated edge-cloud testbed: labels (T, Le, Lp, backpressure, success) for a trace, by simulation.

This is a SIMULATION, not a measurement: every label it yields carries origin="simulated". It stands in
for Costream's cgroup/netem testbed (Costream Sec. VI) and models the mechanics that make placement hard,
in discrete time (default 10 ms steps over 60 simulated seconds):

* tuples move as integer cohorts (count, oldest event time, oldest ingest time, time available) through
  bounded per-edge FIFO queues; a full queue blocks its producer (no input is consumed), which blocks
  its producers in turn, up to the sources, whose unconsumed arrivals wait in an unbounded broker (Kafka
  in Costream);
* arrivals are Poisson per step with a slowly drifting (AR(1), +-10%) rate;
* every tuple costs CPU at each operator: a receive cost (thread hand-off when co-located, half an
  inter-process hop when it crossed hosts), the operator's logic cost, a send cost on cross-host edges,
  and window work (scan + output construction) when a window fires. Costs come from calibration.json
  (measured on this machine by scripts/costmodel_calibrate.py) and are jittered per run (+-10%
  lognormal);
* a host's cpu (% of one reference core) is shared by its busy operators by processor sharing (water-
  filling);
* every host has one outgoing link: a FIFO server of `bandwidth_mbits` plus `latency_ms` propagation;
  nothing is charged between co-located operators;
* filters thin the flow by Binomial(n, selectivity); windows (count or time policy, sliding or tumbling)
  fire at slide boundaries; a join emits Poisson(sel * |W1| * |W2|) tuples (Costream Def. 7), an
  aggregation one tuple per group (Def. 8) or one per window without group-by;
* memory per host = worker base RSS per operator + window state + queued and pending tuples; above 60%
  of the host's RAM, CPU costs grow (garbage collection, up to 5x at 100%); above 100% the run fails
  (success False);
* a run with no tuple at the sink is unsuccessful (Costream Def. 5).

Labels follow Costream Sec. IV-A: T = sink tuples per second (after a warm-up); Le = mean time from the
event's generation (broker) to the sink, Lp = mean time from ingestion by the source operator to the sink
(Def. 2: both measured from the OLDEST input tuple involved, so window outputs count from the window's
oldest tuple; Lp includes operator and network time but not broker waiting); backpressure = the sources
ingested less than `bp_ratio` of what arrived during the second half of the run, or tuples worth more than
`bp_backlog_s` seconds of input queued in the broker at some point of the second half (Def. 4: tuples
queued up in the broker); success per Def. 5 plus crashes. T, Le and Lp get multiplicative lognormal
measurement noise. Same trace + same seed = same labels.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from typing import Any

import numpy as np

from adaptstream.costmodel.model import Labels, Trace

try:  # numba makes one 60 s trace take milliseconds; without it the same code runs as plain Python (slow)
    from numba import njit

    HAVE_NUMBA = True
except ImportError:  # pragma: no cover - exercised only on machines without numba
    HAVE_NUMBA = False

    def njit(*args, **kwargs):  # type: ignore[no-redef]
        def wrap(fn):
            return fn

        return wrap(args[0]) if args and callable(args[0]) else wrap


KIND_CODE = {"source": 0, "filter": 1, "window_agg": 2, "window_join": 3, "sink": 4}
STRING_FILTERS = ("startswith", "endswith", "contains")


@cache
def load_calibration(path: str | None = None) -> dict[str, Any]:
    """The measured per-tuple costs (see scripts/costmodel_calibrate.py and docs/costmodel-data.md)."""
    if path is None:
        text = resources.files("adaptstream_bench.costmodel").joinpath("calibration.json").read_text()
    else:
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
    return json.loads(text)


def _fit(cal: dict[str, Any], name: str, width: float) -> float:
    f = cal["seconds_per_tuple_fit"][name]
    return float(f["a"] + f["b"] * width)


def _bytes(cal: dict[str, Any], key: str, width: float) -> float:
    f = cal[key]
    return float(f["a"] + f["b"] * width)


@dataclass(frozen=True)
class SimConfig:
    """Knobs of the simulated testbed; defaults are the ones the corpus uses (docs/costmodel-data.md)."""

    duration_s: float = 60.0
    dt_s: float = 0.01
    warmup_s: float = 5.0
    queue_capacity: int = 10_000
    bp_ratio: float = 0.95
    bp_backlog_s: float = 0.5
    framing_bytes: float = 58.0  # per tuple message on the wire: 4 B length prefix + TCP/IPv4/Ethernet headers
    gc_threshold: float = 0.6
    gc_max_slowdown: float = 5.0
    noise_sigma: float = 0.05
    cost_jitter_sigma: float = 0.10
    rate_jitter: float = 0.10
    calibration_path: str | None = None
    #: Multiplies every measured CPU cost: how many times slower the Table II "reference core" running a JVM
    #: DSPS is than this machine's core running the Python reference engine. An ASSUMPTION, not a measurement;
    #: see docs/costmodel-data.md for why and for the label balance at 1.0.
    cost_scale: float = 30.0

    def build(self) -> Simulator:
        return Simulator(self)


@dataclass
class SimResult:
    labels: Labels
    details: dict[str, Any] = field(default_factory=dict)


class Simulator:
    """Runs the simulated testbed for one trace at a time (thread-compatible, no shared mutable state)."""

    def __init__(self, config: SimConfig | None = None) -> None:
        self.config = config or SimConfig()
        self.cal = load_calibration(self.config.calibration_path)

    def run(self, trace: Trace, seed: int = 0) -> SimResult:
        cfg = self.config
        rng = np.random.default_rng(seed)
        arrays = compile_trace(trace, self.cal, rng, cfg.cost_jitter_sigma, cfg.framing_bytes, cfg.cost_scale)
        rate_sum = float(sum(float(s.feature("event_rate", 0.0)) for s in trace.query.sources()))
        n_steps = round(cfg.duration_s / cfg.dt_s)
        stats = _simulate(
            n_steps,
            cfg.dt_s,
            round(cfg.warmup_s / cfg.dt_s),
            cfg.queue_capacity,
            cfg.gc_threshold,
            cfg.gc_max_slowdown,
            cfg.rate_jitter,
            int(rng.integers(0, 2**31 - 1)),
            *arrays,
        )
        return self._labels(stats, rng, rate_sum)

    def _labels(self, st: np.ndarray, rng: np.random.Generator, rate_sum: float) -> SimResult:
        cfg = self.config
        (
            cnt_meas,
            sum_le,
            sum_lp,
            cnt_total,
            arrived,
            ingested,
            crashed,
            crash_t,
            max_mem,
            backlog,
            sum_le_all,
            sum_lp_all,
            blocked_frac,
            max_backlog,
        ) = (float(x) for x in st[:14])
        crashed_b = crashed > 0
        end_t = crash_t if crashed_b else cfg.duration_s
        meas_span = max(end_t - cfg.warmup_s, cfg.dt_s)
        noise = np.exp(rng.normal(0.0, cfg.noise_sigma, size=3))
        if cnt_meas > 0:
            thr = cnt_meas / meas_span
            le, lp = sum_le / cnt_meas, sum_lp / cnt_meas
        elif cnt_total > 0:
            thr = cnt_total / max(end_t, cfg.dt_s)
            le, lp = sum_le_all / cnt_total, sum_lp_all / cnt_total
        else:
            thr, le, lp = 0.0, math.nan, math.nan
        success = (cnt_total > 0) and not crashed_b
        backlog_s = max_backlog / rate_sum if rate_sum > 0 else 0.0
        bp = arrived > 0 and (ingested < cfg.bp_ratio * arrived or backlog_s > cfg.bp_backlog_s)
        labels = Labels(
            throughput=float(thr * noise[0]),
            e2e_latency_ms=None if math.isnan(le) else float(le * 1000.0 * noise[1]),
            proc_latency_ms=None if math.isnan(lp) else float(lp * 1000.0 * noise[2]),
            backpressure=bool(bp),
            success=bool(success),
            origin="simulated",
        )
        reason = "oom" if crashed_b else ("no_output" if cnt_total == 0 else "")
        details = {
            "failure_reason": reason,
            "sink_tuples": int(cnt_total),
            "max_mem_fraction": round(max_mem, 4),
            "broker_backlog_end": int(backlog),
            "ingest_ratio_2nd_half": round(ingested / arrived, 4) if arrived > 0 else None,
            "blocked_fraction": round(blocked_frac, 4),
            "max_broker_backlog_s": round(backlog_s, 3),
            "sim_end_s": round(end_t, 3),
        }
        return SimResult(labels, details)


def simulate_labels(trace: Trace, seed: int = 0, config: SimConfig | None = None) -> Labels:
    """Convenience: simulated labels for one trace."""
    return Simulator(config).run(trace, seed).labels


def compile_trace(
    trace: Trace,
    cal: dict[str, Any],
    rng: np.random.Generator,
    jitter: float,
    framing_bytes: float = 58.0,
    cost_scale: float = 1.0,
) -> tuple:
    """Flatten a trace into the arrays the kernel reads (operators in topological order)."""
    q = trace.query
    order = q.topological_order()
    idx = {op.id: i for i, op in enumerate(order)}
    host_ids = [h.id for h in trace.hosts]
    n = len(order)
    kind = np.array([KIND_CODE[op.kind] for op in order], dtype=np.int64)
    host = np.array([host_ids.index(trace.placement[op.id]) for op in order], dtype=np.int64)
    down = np.full(n, -1, dtype=np.int64)
    ups = np.full((n, 2), -1, dtype=np.int64)
    width_out = np.zeros(n)
    for op in order:
        i = idx[op.id]
        ds = q.downstream(op.id)
        if ds:
            down[i] = idx[ds[0]]
        for p, u in enumerate(q.upstream(op.id)[:2]):
            ups[i, p] = idx[u]
    for op in order:
        i = idx[op.id]
        w = op.feature("tuple_width_out")
        if w is None:
            ws = [width_out[idx[u]] for u in q.upstream(op.id)]
            w = sum(ws) if op.kind == "window_join" else (ws[0] if ws else 3)
        width_out[i] = float(w)
    cross = np.array([1 if down[i] >= 0 and host[i] != host[down[i]] else 0 for i in range(n)], dtype=np.int64)
    width_in = np.array(
        [np.mean([width_out[u] for u in ups[i] if u >= 0]) if ups[i, 0] >= 0 else width_out[i] for i in range(n)]
    )
    c_recv = np.zeros(n)  # per tuple arriving over edge e (e = producer index), charged to the receiver
    c_logic, c_send, c_emit, c_scan = np.zeros(n), np.zeros(n), np.zeros(n), np.zeros(n)
    sel, group, wpol, wsize, wslide, mpanes = (
        np.zeros(n),
        np.zeros(n, np.int64),
        np.zeros(n, np.int64),
        np.zeros(n),
        np.zeros(n),
        np.ones(n, np.int64),
    )
    rate = np.zeros(n)
    mem_in = np.array([_bytes(cal, "bytes_in_memory_fit", w) for w in width_in])
    mem_out = np.array([_bytes(cal, "bytes_in_memory_fit", w) for w in width_out])
    wire_out = np.array([_bytes(cal, "bytes_on_wire_fit", w) + framing_bytes for w in width_out])
    for op in order:
        i = idx[op.id]
        wi, wo = width_in[i], width_out[i]
        if down[i] >= 0:
            c_recv[i] = _fit(cal, "process_hop", wo) / 2 if cross[i] else _fit(cal, "thread_handoff", wo)
            c_send[i] = _fit(cal, "process_hop", wo) / 2 if cross[i] else 0.0
        f = op.features
        if op.kind == "source":
            rate[i] = float(f.get("event_rate", 1000.0))
            c_logic[i] = _fit(cal, "process_hop", wo) / 2  # receive from the (remote) broker
            sel[i] = 1.0
        elif op.kind == "filter":
            fn = str(f.get("filter_function", "<"))
            is_str = fn in STRING_FILTERS or f.get("literal_type") == "str"
            c_logic[i] = _fit(cal, "filter_string" if is_str else "filter_numeric", wi)
            sel[i] = float(f.get("selectivity", 1.0))
        elif op.kind in ("window_agg", "window_join"):
            sel[i] = float(f.get("selectivity", 0.1))
            wpol[i] = 1 if f.get("window_policy", "time") == "time" else 0
            wsize[i] = float(f.get("window_size", 1.0))
            wslide[i] = float(f.get("window_slide", wsize[i])) or wsize[i]
            mpanes[i] = max(1, min(8, round(wsize[i] / wslide[i])))
            c_emit[i] = _fit(cal, "join_output", wo)
            if op.kind == "window_agg":
                group[i] = 0 if f.get("group_by_type", "none") in ("none", None, "") else 1
                c_logic[i] = _fit(cal, "agg_update", wi)
                c_scan[i] = _fit(cal, "agg_update", wi) if mpanes[i] > 1 else 0.0  # sliding: recompute
            else:
                c_logic[i] = _fit(cal, "handoff", wi)  # append to the window
                c_scan[i] = _fit(cal, "join_build_probe", wi)  # hash build + probe when the window fires
        else:  # sink
            c_logic[i] = _fit(cal, "sink", wi)
    j = np.exp(rng.normal(0.0, jitter, size=(4, n))) if jitter > 0 else np.ones((4, n))
    j = j * cost_scale
    c_recv, c_logic, c_send, c_emit = c_recv * j[0], c_logic * j[1], c_send * j[2], c_emit * j[3]
    c_scan = c_scan * j[1]
    hs = trace.hosts
    base_mb = float(cal.get("base_worker_rss_mb", 60.0))
    ops_per_host = np.bincount(host, minlength=len(hs)).astype(np.float64)
    h_cores = np.array([h.cpu / 100.0 for h in hs])
    h_ram = np.array([h.ram_mb * 1e6 for h in hs])
    h_bw = np.array([h.bandwidth_mbits * 1e6 / 8.0 for h in hs])
    h_lat = np.array([h.latency_ms / 1000.0 for h in hs])
    h_base = ops_per_host * base_mb * 1e6
    return (
        kind,
        host,
        down,
        ups,
        cross,
        c_recv,
        c_logic,
        c_send,
        c_emit,
        c_scan,
        sel,
        group,
        wpol,
        wsize,
        wslide,
        mpanes,
        rate,
        mem_in,
        mem_out,
        wire_out,
        h_cores,
        h_ram,
        h_bw,
        h_lat,
        h_base,
    )


@njit(cache=True)
def _push(q, k, org, ing, av, qc, qo, qi, qa, qt, qn, ring):
    t = qt[q] % ring
    qc[q, t] = k
    qo[q, t] = org
    qi[q, t] = ing
    qa[q, t] = av
    qt[q] += 1
    qn[q] += k


@njit(cache=True)
def _send(i, k, org, ing, tau, cross, host, wire_out, link_free, h_bw, h_lat, qc, qo, qi, qa, qt, qn, ring):
    """Put k output tuples of operator i on its out-edge; a cross-host edge queues on the host's link."""
    if k <= 0:
        return
    av = tau
    if cross[i] == 1:
        h = host[i]
        start = max(link_free[h], tau)
        link_free[h] = start + k * wire_out[i] / h_bw[h]
        av = link_free[h] + h_lat[h]
    _push(i, k, org, ing, av, qc, qo, qi, qa, qt, qn, ring)


@njit(cache=True)
def _avail_count(q, t1, qc, qa, qh, qt, ring):
    """Tuples in queue q that are available before t1 (cohorts are FIFO, availability non-decreasing)."""
    tot = 0
    for k in range(qh[q], qt[q]):
        j = k % ring
        if qa[q, j] >= t1:
            break
        tot += qc[q, j]
    return tot


@njit(cache=True)
def _waterfill(h, host, demand, budget, cap):
    """Processor sharing: equal shares of cap among busy operators of host h, unused shares redistributed."""
    n = host.shape[0]
    left = cap
    active = 0
    for i in range(n):
        if host[i] == h:
            budget[i] = 0.0
            if demand[i] > 0:
                active += 1
    while active > 0 and left > 1e-15:
        share = left / active
        sat = 0
        for i in range(n):
            if host[i] == h and demand[i] > budget[i] + 1e-18:
                need = demand[i] - budget[i]
                if need <= share:
                    budget[i] = demand[i]
                    left -= need
                    sat += 1
        if sat == 0:
            for i in range(n):
                if host[i] == h and demand[i] > budget[i] + 1e-18:
                    budget[i] += share
            left = 0.0
        active -= sat


@njit(cache=True)
def _close_pane(
    i,
    tc,
    kind,
    group,
    sel,
    c_scan,
    c_emit,
    mpanes,
    cur0,
    cur1,
    cur_o,
    cur_i,
    pc0,
    pc1,
    po,
    pi_,
    pptr,
    debt,
    pend,
    pend_o,
    pend_i,
):
    """Close the current pane of window operator i and fire the window over the last m panes."""
    m = mpanes[i]
    slot = pptr[i] % m
    pc0[i, slot] = cur0[i]
    pc1[i, slot] = cur1[i]
    po[i, slot] = cur_o[i]
    pi_[i, slot] = cur_i[i]
    pptr[i] += 1
    cur0[i] = 0
    cur1[i] = 0
    cur_o[i] = 1e18
    cur_i[i] = 1e18
    n0 = 0
    n1 = 0
    oo = 1e18
    oi = 1e18
    for p in range(m):
        n0 += pc0[i, p]
        n1 += pc1[i, p]
        if pc0[i, p] + pc1[i, p] > 0:
            oo = min(oo, po[i, p])
            oi = min(oi, pi_[i, p])
    outs = 0
    if kind[i] == 2:
        if n0 > 0:
            outs = max(1, np.random.poisson(sel[i] * n0)) if group[i] == 1 else 1
        work = c_scan[i] * n0 + c_emit[i] * outs
    else:
        if n0 > 0 and n1 > 0:
            outs = np.random.poisson(sel[i] * float(n0) * float(n1))
        work = c_scan[i] * (n0 + n1) + c_emit[i] * outs
    debt[i] += work
    if outs > 0:
        if pend[i] == 0:
            pend_o[i] = oo
            pend_i[i] = oi
        else:
            pend_o[i] = min(pend_o[i], oo)
            pend_i[i] = min(pend_i[i], oi)
        pend[i] += outs


@njit(cache=True)
def _simulate(
    n_steps,
    dt,
    warm_steps,
    qcap,
    gc_thr,
    gc_max,
    rate_jitter,
    seed,
    kind,
    host,
    down,
    ups,
    cross,
    c_recv,
    c_logic,
    c_send,
    c_emit,
    c_scan,
    sel,
    group,
    wpol,
    wsize,
    wslide,
    mpanes,
    rate,
    mem_in,
    mem_out,
    wire_out,
    h_cores,
    h_ram,
    h_bw,
    h_lat,
    h_base,
):
    np.random.seed(seed)
    n = kind.shape[0]
    nh = h_cores.shape[0]
    ring = n_steps + 8
    nq = 2 * n  # 0..n-1: out-edge queue of operator e; n+i: broker queue of source i
    qc = np.zeros((nq, ring), np.int64)
    qo = np.zeros((nq, ring))
    qi = np.zeros((nq, ring))
    qa = np.zeros((nq, ring))
    qh = np.zeros(nq, np.int64)
    qt = np.zeros(nq, np.int64)
    qn = np.zeros(nq, np.int64)
    debt = np.zeros(n)
    pend = np.zeros(n, np.int64)
    pend_o = np.zeros(n)
    pend_i = np.zeros(n)
    tau = np.zeros(n)
    link_free = np.zeros(nh)
    cur0 = np.zeros(n, np.int64)
    cur1 = np.zeros(n, np.int64)
    cur_o = np.full(n, 1e18)
    cur_i = np.full(n, 1e18)
    pc0 = np.zeros((n, 8), np.int64)
    pc1 = np.zeros((n, 8), np.int64)
    po = np.full((n, 8), 1e18)
    pi_ = np.full((n, 8), 1e18)
    pptr = np.zeros(n, np.int64)
    next_close = wslide.copy()
    drift = np.zeros(n)
    budget = np.zeros(n)
    demand = np.zeros(n)
    speed = np.zeros(n)
    slow = np.ones(nh)
    acc = np.zeros(8)
    half = n_steps // 2
    arrived = 0.0
    crashed = 0
    crash_t = 0.0
    max_mem = 0.0
    blocked_steps = 0.0
    a_rho = 0.99
    a_sd = math.sqrt(1.0 - a_rho * a_rho)
    steps_run = 0
    max_backlog = 0.0
    for step in range(n_steps):
        t0 = step * dt
        t1 = t0 + dt
        steps_run = step + 1
        # arrivals at the broker: Poisson with an AR(1)-drifting rate
        for i in range(n):
            if kind[i] == 0:
                drift[i] = a_rho * drift[i] + a_sd * np.random.normal()
                lam = rate[i] * dt * max(0.0, 1.0 + rate_jitter * drift[i])
                a = np.random.poisson(lam)
                if a > 0:
                    _push(n + i, a, t0 + 0.5 * dt, 0.0, t0 + 0.5 * dt, qc, qo, qi, qa, qt, qn, ring)
                    if step >= half:
                        arrived += a
        # time-based windows fire at slide boundaries
        for i in range(n):
            if (kind[i] == 2 or kind[i] == 3) and wpol[i] == 1:
                while t0 >= next_close[i]:
                    _close_pane(
                        i,
                        next_close[i],
                        kind,
                        group,
                        sel,
                        c_scan,
                        c_emit,
                        mpanes,
                        cur0,
                        cur1,
                        cur_o,
                        cur_i,
                        pc0,
                        pc1,
                        po,
                        pi_,
                        pptr,
                        debt,
                        pend,
                        pend_o,
                        pend_i,
                    )
                    next_close[i] += wslide[i]
        # memory per host: worker base + window state + queued (at the receiver) + pending outputs
        mem = h_base.copy()
        for i in range(n):
            if kind[i] == 2 or kind[i] == 3:
                stt = cur0[i] + cur1[i]
                for p in range(mpanes[i]):
                    stt += pc0[i, p] + pc1[i, p]
                mem[host[i]] += stt * mem_in[i]
            mem[host[i]] += pend[i] * mem_out[i]
            if down[i] >= 0:
                mem[host[down[i]]] += qn[i] * mem_out[i]
        for h in range(nh):
            frac = mem[h] / h_ram[h]
            max_mem = max(max_mem, frac)
            if frac > 1.0:
                crashed = 1
            elif frac > gc_thr:
                x = (frac - gc_thr) / (1.0 - gc_thr)
                slow[h] = 1.0 + (gc_max - 1.0) * x * x
            else:
                slow[h] = 1.0
        if crashed == 1:
            crash_t = t0
            break
        # CPU demand estimate, then processor sharing per host
        for i in range(n):
            tau[i] = t0
            d = debt[i]
            if kind[i] == 0:
                d += _avail_count(n + i, t1, qc, qa, qh, qt, ring) * c_logic[i]
            else:
                for p in range(2):
                    u = ups[i, p]
                    if u >= 0:
                        d += (_avail_count(u, t1, qc, qa, qh, qt, ring) + 1) * (c_recv[u] + c_logic[i])
            demand[i] = d * slow[host[i]]
        for h in range(nh):
            _waterfill(h, host, demand, budget, h_cores[h] * dt)
            busy = 0
            for i in range(n):
                if host[i] == h and demand[i] > 0:
                    busy += 1
            for i in range(n):
                if host[i] == h:
                    speed[i] = h_cores[h] / slow[h] / max(1, busy)
        # pass 1 with the shares, pass 2 hands capacity unused in pass 1 to the host's operators equally
        any_blocked = 0
        used_h = np.zeros(nh)
        for pss in range(2):
            if pss == 1:
                for h in range(nh):
                    cnt_h = 0
                    for i in range(n):
                        if host[i] == h:
                            cnt_h += 1
                    left = max(0.0, h_cores[h] * dt - used_h[h])
                    for i in range(n):
                        if host[i] == h:
                            budget[i] = left / cnt_h
            for i in range(n):
                b = budget[i] / slow[host[i]]
                if b <= 0.0:
                    continue
                # ---- operator i works with budget b (core-seconds) in [t0, t1) ----
                used = 0.0
                blk = 0
                sp = max(speed[i], 1e-9)
                while True:
                    # 1. outstanding work (window firing, send costs) comes first
                    if debt[i] > 0:
                        x = min(debt[i], b - used)
                        debt[i] -= x
                        used += x
                        tau[i] += x / sp
                        if debt[i] > 1e-15:
                            break
                        debt[i] = 0.0
                    # 2. a fired window's outputs leave once its work is done, as far as the out-edge has room
                    if pend[i] > 0:
                        space = qcap - qn[i]
                        k = min(pend[i], space)
                        if k > 0:
                            _send(
                                i,
                                k,
                                pend_o[i],
                                pend_i[i],
                                tau[i],
                                cross,
                                host,
                                wire_out,
                                link_free,
                                h_bw,
                                h_lat,
                                qc,
                                qo,
                                qi,
                                qa,
                                qt,
                                qn,
                                ring,
                            )
                            pend[i] -= k
                            debt[i] += c_send[i] * k
                            continue
                        blk = 1
                        break
                    # 3. consume the earliest available input cohort
                    qsel = -1
                    best = 1e18
                    if kind[i] == 0:
                        q = n + i
                        if qh[q] < qt[q] and qa[q, qh[q] % ring] < t1:
                            qsel = q
                    else:
                        for p in range(2):
                            q = ups[i, p]
                            if q >= 0 and qh[q] < qt[q]:
                                av = qa[q, qh[q] % ring]
                                if av < t1 and av < best:
                                    best = av
                                    qsel = q
                    if qsel < 0:
                        break
                    j = qh[qsel] % ring
                    cnt = qc[qsel, j]
                    start = max(tau[i], qa[qsel, j])
                    if start >= t1:
                        break
                    per = c_logic[i] + (c_recv[qsel] if kind[i] != 0 else 0.0)
                    nmax = int((b - used) / per)
                    if nmax <= 0:
                        break
                    k = min(cnt, nmax)
                    if kind[i] <= 1:  # source and filter: no more input than the out-edge can take
                        space = qcap - qn[i]
                        if space <= 0:
                            blk = 1
                            break
                        k = min(k, space)
                    if (kind[i] == 2 or kind[i] == 3) and wpol[i] == 0:  # count window: stop at the pane boundary
                        k = min(k, max(1, int(wslide[i]) - (cur0[i] + cur1[i])))
                    org = qo[qsel, j]
                    ing = qi[qsel, j]
                    qc[qsel, j] -= k
                    qn[qsel] -= k
                    if qc[qsel, j] == 0:
                        qh[qsel] += 1
                    used += k * per
                    tau[i] = start + k * per / sp
                    if kind[i] == 0:
                        if step >= half:
                            acc[6] += k
                        _send(
                            i,
                            k,
                            org,
                            start,
                            tau[i],
                            cross,
                            host,
                            wire_out,
                            link_free,
                            h_bw,
                            h_lat,
                            qc,
                            qo,
                            qi,
                            qa,
                            qt,
                            qn,
                            ring,
                        )
                        debt[i] += c_send[i] * k
                    elif kind[i] == 1:
                        out = np.random.binomial(k, sel[i])
                        _send(
                            i,
                            out,
                            org,
                            ing,
                            tau[i],
                            cross,
                            host,
                            wire_out,
                            link_free,
                            h_bw,
                            h_lat,
                            qc,
                            qo,
                            qi,
                            qa,
                            qt,
                            qn,
                            ring,
                        )
                        debt[i] += c_send[i] * out
                    elif kind[i] == 4:
                        arr = 0.5 * (start + tau[i])
                        acc[3] += k
                        acc[4] += k * (arr - org)
                        acc[5] += k * (arr - ing)
                        if step >= warm_steps:
                            acc[0] += k
                            acc[1] += k * (arr - org)
                            acc[2] += k * (arr - ing)
                    else:
                        if qsel == ups[i, 1]:
                            cur1[i] += k
                        else:
                            cur0[i] += k
                        cur_o[i] = min(cur_o[i], org)
                        cur_i[i] = min(cur_i[i], ing)
                        if wpol[i] == 0 and cur0[i] + cur1[i] >= int(wslide[i]):
                            _close_pane(
                                i,
                                tau[i],
                                kind,
                                group,
                                sel,
                                c_scan,
                                c_emit,
                                mpanes,
                                cur0,
                                cur1,
                                cur_o,
                                cur_i,
                                pc0,
                                pc1,
                                po,
                                pi_,
                                pptr,
                                debt,
                                pend,
                                pend_o,
                                pend_i,
                            )
                used_h[host[i]] += used * slow[host[i]]
                if blk == 1:
                    any_blocked = 1
        if any_blocked == 1:
            blocked_steps += 1
        if step >= half:
            bl = 0.0
            for i in range(n):
                if kind[i] == 0:
                    bl += qn[n + i]
            max_backlog = max(max_backlog, bl)
    backlog = 0.0
    for i in range(n):
        if kind[i] == 0:
            backlog += qn[n + i]
    stats = np.zeros(16)
    stats[0] = acc[0]
    stats[1] = acc[1]
    stats[2] = acc[2]
    stats[3] = acc[3]
    stats[4] = arrived
    stats[5] = acc[6]
    stats[6] = crashed
    stats[7] = crash_t
    stats[8] = max_mem
    stats[9] = backlog
    stats[10] = acc[4]
    stats[11] = acc[5]
    stats[12] = blocked_steps / max(1, steps_run)
    stats[13] = max_backlog
    return stats
