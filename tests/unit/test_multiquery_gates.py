"""Start gates of the multi-query runner: generated queries start first, their input together (pure Python)."""

from __future__ import annotations

import threading

from adaptstream.app.multiquery import MultiSpec, _gates, _open_gates, workload_names
from adaptstream.app.runner import RunSpec
from adaptstream.connectors.generator import read_start_gate


def _ms(*inputs: str | None, together: bool = True) -> MultiSpec:
    return MultiSpec(tuple(RunSpec(workload="YSB", input_dir=i) for i in inputs), together=together)


def test_gates_only_for_generated_queries_of_a_multi_query_run(tmp_path):
    ms = _ms(None, "/data/in", None)
    names = workload_names([s.workload for s in ms.specs])
    gates = _gates(ms, names, str(tmp_path))
    assert sorted(gates) == ["YSB", "YSB-3"]  # the --input query's arrivals are not the runner's to hold
    assert all(p.startswith(str(tmp_path / "start-gates")) for p in gates.values())
    assert _gates(_ms(None), ["YSB"], str(tmp_path)) == {}  # one query: nothing to wait for
    assert _gates(_ms(None, None, together=False), ["YSB", "YSB-2"], str(tmp_path)) == {}


def test_gates_open_at_go_plus_each_delay_once_every_query_is_up(tmp_path):
    ms = _ms(None, None)
    gates = _gates(ms, ["YSB", "YSB-2"], str(tmp_path))
    alive = {n: threading.Event() for n in gates}
    delays = {"YSB": 0.5, "YSB-2": 3.0}
    opener = threading.Thread(target=_open_gates, args=(gates, alive, delays, []))
    opener.start()
    alive["YSB"].set()
    assert read_start_gate(gates["YSB"]) is None  # one query still starting: nothing opens
    alive["YSB-2"].set()
    opener.join(5)
    a, b = read_start_gate(gates["YSB"]), read_start_gate(gates["YSB-2"])
    assert a is not None and b is not None and abs((b - a) - 2.5) < 1e-6


def test_gates_stay_shut_when_a_query_failed(tmp_path):
    gates = _gates(_ms(None, None), ["YSB", "YSB-2"], str(tmp_path))
    alive = {n: threading.Event() for n in gates}
    for e in alive.values():
        e.set()
    _open_gates(gates, alive, {"YSB": 0.0, "YSB-2": 0.0}, [RuntimeError("query failed")])
    assert all(read_start_gate(p) is None for p in gates.values())
