"""Measure per-tuple operator costs on this machine; writes benchmarks/adaptstream_bench/costmodel/calibration.json.

The simulated edge-cloud testbed (adaptstream_bench.costmodel.simulator) charges CPU per tuple. The costs are taken
from a tuple-at-a-time reference implementation in plain Python timed here on one core (= 100% cpu in Table I
terms): a tuple is a Python tuple of `width` mixed int/str/double values; every operator receives it through a
queue hand-off (`handoff`: deque; `thread_handoff`: queue.Queue between two threads = co-located
executors) or, across hosts, a one-message-per-tuple OS pipe between two processes (`process_hop`, CPU of
both ends, pickling included). Each cost is the median of several timed
loops, fitted as `a + b * width` (seconds per tuple) over widths 3..20. Memory per stored tuple is the deep
`sys.getsizeof` of such a tuple; wire size is `len(pickle.dumps(...))`; the per-operator base memory is the
peak RSS of a bare Python worker process. Run: `nice -n 10 python scripts/costmodel_calibrate.py` (~30 s).
"""

from __future__ import annotations

import itertools
import json
import multiprocessing as mp
import os
import pickle
import platform
import queue
import random
import resource
import statistics
import subprocess
import sys
import threading
import time
from collections import defaultdict, deque
from pathlib import Path

import numpy as np

OUT = Path(__file__).resolve().parents[1] / "benchmarks" / "adaptstream_bench" / "costmodel" / "calibration.json"
WIDTHS = (3, 6, 10, 20)
N = 20_000
REPEATS = 5


def make_tuples(width: int, n: int, seed: int = 0) -> list[tuple]:
    rnd = random.Random(seed)
    kinds = [("int", "str", "double")[i % 3] for i in range(width)]
    out = []
    for _ in range(n):
        row = []
        for k in kinds:
            if k == "int":
                row.append(rnd.randrange(1000))
            elif k == "str":
                row.append(f"s{rnd.randrange(100000):05d}")
            else:
                row.append(rnd.random() * 100)
        out.append(tuple(row))
    return out


def timed(fn, data) -> float:
    """Median seconds per tuple of fn(data) over REPEATS runs."""
    samples = []
    for _ in range(REPEATS):
        t0 = time.perf_counter()
        fn(data)
        samples.append((time.perf_counter() - t0) / len(data))
    return statistics.median(samples)


def op_handoff(data):
    q: deque = deque()
    for t in data:
        q.append(t)
    while q:
        q.popleft()


def op_serde(data):
    for t in data:
        pickle.loads(pickle.dumps(t, protocol=5))


def op_filter_num(data):
    return [t for t in data if t[0] < 500]


def op_filter_str(data):
    return [t for t in data if t[1].startswith("s0")]


def op_agg_update(data):
    groups: dict = defaultdict(lambda: [0, 0.0, float("inf"), float("-inf")])
    for t in data:
        g = groups[t[0]]
        v = t[2]
        g[0] += 1
        g[1] += v
        if v < g[2]:
            g[2] = v
        if v > g[3]:
            g[3] = v
    return groups


def op_join_build_probe(data):
    half = len(data) // 2
    table: dict = defaultdict(list)
    for t in data[:half]:
        table[t[0]].append(t)
    hits = 0
    for t in data[half:]:
        hits += len(table.get(t[0], ()))
    return hits


def op_join_output(data):
    return [a + b for a, b in itertools.pairwise(data)]


def op_sink(data):
    out = []
    now = time.time
    for t in data:
        out.append((now(), t))
    return out


def op_source(data):
    blobs = [pickle.dumps(t, protocol=5) for t in data]
    t0 = time.perf_counter()
    for b in blobs:
        pickle.loads(b)
    return time.perf_counter() - t0


def _recv_n(conn, n: int) -> None:
    for _ in range(n):
        conn.recv()


def process_hop(data) -> float:
    """CPU seconds (sender + receiver process) per tuple sent one message per tuple over an OS pipe."""
    ctx = mp.get_context("fork")
    rx, tx = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_recv_n, args=(rx, len(data)))
    s0, c0 = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    proc.start()
    for t in data:
        tx.send(t)
    proc.join()
    s1, c1 = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = sum(b.ru_utime - a.ru_utime + b.ru_stime - a.ru_stime for a, b in ((s0, s1), (c0, c1)))
    return cpu / len(data)


def thread_handoff(data) -> float:
    """CPU seconds per tuple passed between two threads via a bounded queue.Queue (co-located executors)."""
    q: queue.Queue = queue.Queue(maxsize=1000)

    def consume() -> None:
        for _ in range(len(data)):
            q.get()

    th = threading.Thread(target=consume)
    t0 = time.process_time()
    th.start()
    for t in data:
        q.put(t)
    th.join()
    return (time.process_time() - t0) / len(data)


def deep_size(t: tuple) -> int:
    return sys.getsizeof(t) + sum(sys.getsizeof(v) for v in t)


def fit(widths, values) -> dict[str, float]:
    b, a = np.polyfit(np.asarray(widths, float), np.asarray(values, float), 1)
    return {"a": float(max(a, 0.0)), "b": float(max(b, 0.0))}


def base_worker_rss_mb() -> float:
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    subprocess.run([sys.executable, "-c", "import pickle, collections, json"], check=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return max(after, before) / 1024.0


def main() -> None:
    ops = {
        "handoff": op_handoff,
        "serde": op_serde,
        "filter_numeric": op_filter_num,
        "filter_string": op_filter_str,
        "agg_update": op_agg_update,
        "join_build_probe": op_join_build_probe,
        "join_output": op_join_output,
        "sink": op_sink,
    }
    raw: dict[str, dict[int, float]] = {k: {} for k in ops}
    raw["source_deserialize"] = {}
    raw["process_hop"] = {}
    raw["thread_handoff"] = {}
    sizes, wire = {}, {}
    for w in WIDTHS:
        data = make_tuples(w, N, seed=w)
        for name, fn in ops.items():
            raw[name][w] = timed(fn, data)
        raw["source_deserialize"][w] = statistics.median(op_source(data) / len(data) for _ in range(REPEATS))
        raw["process_hop"][w] = statistics.median(process_hop(data[:10_000]) for _ in range(3))
        raw["thread_handoff"][w] = statistics.median(thread_handoff(data[:10_000]) for _ in range(3))
        sizes[w] = statistics.mean(deep_size(t) for t in data[:1000])
        wire[w] = statistics.mean(len(pickle.dumps(t, protocol=5)) for t in data[:1000])
    fits = {name: fit(WIDTHS, [raw[name][w] for w in WIDTHS]) for name in raw}
    result = {
        "method": __doc__.strip().splitlines()[0],
        "machine": {
            "platform": platform.platform(),
            "python": platform.python_version(),
            "processor": platform.processor() or platform.machine(),
            "cpus": os.cpu_count(),
        },
        "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "tuples_per_loop": N,
        "repeats": REPEATS,
        "widths": list(WIDTHS),
        "seconds_per_tuple_raw": {k: {str(w): v for w, v in d.items()} for k, d in raw.items()},
        "seconds_per_tuple_fit": fits,
        "bytes_in_memory_fit": fit(WIDTHS, [sizes[w] for w in WIDTHS]),
        "bytes_on_wire_fit": fit(WIDTHS, [wire[w] for w in WIDTHS]),
        "base_worker_rss_mb": base_worker_rss_mb(),
    }
    OUT.write_text(json.dumps(result, indent=2) + "\n")
    for name, f in fits.items():
        print(f"{name:22s} a={f['a'] * 1e9:8.1f} ns  b={f['b'] * 1e9:7.1f} ns/attr")
    print("memory bytes/tuple fit", result["bytes_in_memory_fit"], "wire", result["bytes_on_wire_fit"])
    print("base worker RSS MB", result["base_worker_rss_mb"], "->", OUT)


if __name__ == "__main__":
    main()
