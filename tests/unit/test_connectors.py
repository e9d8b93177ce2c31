"""Connectors, manifest, parsing with quarantine, traffic patterns and source options (no Spark)."""

from __future__ import annotations

import os

import pyarrow as pa
import pytest

from adaptstream.connectors.base import Manifest
from adaptstream.connectors.files import FilesConnector
from adaptstream.connectors.generator import (
    DatasetWriter,
    GeneratorConnector,
    gate_ready_path,
    open_start_gate,
    read_start_gate,
)
from adaptstream.connectors.parsing import parse_csv, parse_jsonl
from adaptstream.connectors.traffic import RandomTraffic, SinusoidalTraffic, StepTraffic, build_traffic
from adaptstream.errors import ConfigError, ConnectorError, UnknownNameError
from adaptstream.spark.options import SourceOptions

SCHEMA = pa.schema([("k", pa.string()), ("v", pa.int32()), ("x", pa.float64())])


def test_csv_fast_path_types_and_nulls():
    res = parse_csv(b"a,1,0.5\nb,,2\n", SCHEMA)
    assert res.bad == []
    assert res.table.to_pylist() == [{"k": "a", "v": 1, "x": 0.5}, {"k": "b", "v": None, "x": 2.0}]
    assert res.table.schema == SCHEMA


def test_csv_bad_rows_are_quarantined_with_line_and_reason():
    res = parse_csv(b"a,1,0.5\nb,zz,1\nc,2\nd,3,4.5,9\ne,4,1e3\n", SCHEMA)
    assert [r["k"] for r in res.table.to_pylist()] == ["a", "e"]
    assert [(b["row"], b["offset"], b["raw"]) for b in res.bad] == [
        (2, 8, "b,zz,1"),
        (3, 15, "c,2"),
        (4, 19, "d,3,4.5,9"),
    ]
    assert "column v" in res.bad[0]["reason"] and "3 fields" not in res.bad[1]["reason"]


def test_csv_header_is_skipped():
    res = parse_csv(b"k,v,x\na,1,2\n", SCHEMA, header=True)
    assert res.table.num_rows == 1 and res.bad == []


def test_jsonl_bad_lines_quarantined():
    res = parse_jsonl(b'{"k":"a","v":1,"x":1.5}\nnot json\n{"k":"b","v":"seven","x":1}\n{"k":"c","v":3}\n', SCHEMA)
    assert [r["k"] for r in res.table.to_pylist()] == ["a", "c"]
    assert sorted(b["row"] for b in res.bad) == [2, 3]


def test_manifest_is_durable_and_ordered(tmp_path):
    m = Manifest(str(tmp_path / "m.jsonl"))
    m.append([("/a", 1.0, 10, False), ("/b", 2.0, 20, False)])
    again = Manifest(str(tmp_path / "m.jsonl"))
    assert [(r.seq, r.path) for r in again.items] == [(0, "/a"), (1, "/b")]
    with pytest.raises(ConnectorError, match="beyond the manifest"):
        again.slice(0, 5)


def test_files_connector_orders_by_mtime_and_ignores_hidden(tmp_path):
    d = tmp_path / "in"
    d.mkdir()
    for name, mtime in [("b.csv", 200.0), ("a.csv", 300.0), (".tmp.csv", 100.0), ("_x.csv", 50.0)]:
        (d / name).write_text("x,1,1\n")
        os.utime(d / name, (mtime, mtime))
    conn = FilesConnector(Manifest(str(tmp_path / "m.jsonl")), str(d))
    assert [os.path.basename(r.path) for r in conn.poll()] == ["b.csv", "a.csv"]  # old files are stable
    assert conn.poll() == []


def test_files_connector_drain_appends_sentinel_once(tmp_path):
    d = tmp_path / "in"
    d.mkdir()
    (d / "a.csv").write_text("x,1,1\n")
    sentinel = tmp_path / "sentinel.csv"
    sentinel.write_text("z,0,0\n")
    conn = FilesConnector(
        Manifest(str(tmp_path / "m.jsonl")), str(d), drain=True, sentinel_path=str(sentinel), stable_seconds=0
    )
    assert len(conn.poll()) == 1
    assert conn.poll() == []  # first empty scan
    sealed = conn.poll()
    assert len(sealed) == 1 and sealed[0].sentinel
    assert conn.exhausted()
    assert conn.poll() == []


def test_dataset_writer_paces_by_clock_and_resumes(tmp_path):
    now = [100.0]
    table = pa.table({"k": ["a"], "v": [1], "x": [1.0]})
    w = DatasetWriter(str(tmp_path / "out"), lambda k: table, header=False, duration=3, clock=lambda: now[0])
    assert w.step() and os.listdir(tmp_path / "out") == []
    now[0] = 102.0
    assert w.step()
    assert sorted(os.listdir(tmp_path / "out")) == ["00000000.csv", "00000001.csv"]
    w2 = DatasetWriter(str(tmp_path / "out"), lambda k: table, header=False, duration=3, clock=lambda: now[0])
    assert w2.next_second == 2
    now[0] = 200.0
    assert not w2.step()
    assert len(os.listdir(tmp_path / "out")) == 3


def _gated(tmp_path, now: list[float]) -> tuple[GeneratorConnector, str]:
    table = pa.table({"k": ["a"], "v": [1], "x": [1.0]})
    w = DatasetWriter(str(tmp_path / "out"), lambda k: table, header=False, duration=3, clock=lambda: now[0])
    gate = str(tmp_path / "gate")
    return GeneratorConnector(Manifest(str(tmp_path / "m.jsonl")), w, start_gate=gate), gate


def test_start_gate_holds_the_generator_until_opened_then_starts_at_its_time(tmp_path):
    now = [100.0]
    conn, gate = _gated(tmp_path, now)
    conn.start()  # up: says so, and waits for the gate
    assert os.path.exists(gate_ready_path(gate)) and conn._thread is None
    conn.start()
    assert conn._thread is None and os.listdir(tmp_path / "out") == []
    open_start_gate(gate, 150.0)
    assert read_start_gate(gate) == 150.0
    conn.start()
    try:
        assert conn._thread is not None and conn.writer.start == 150.0  # event time 0 at the gate's time
    finally:
        conn.stop()
        conn._thread.join(5)
    assert os.listdir(tmp_path / "out") == []  # dataset 0 is due at 151, the clock says 100


def test_start_gate_in_the_past_starts_now_and_a_resumed_writer_ignores_it(tmp_path):
    now = [100.0]
    conn, gate = _gated(tmp_path, now)
    open_start_gate(gate, 40.0)
    conn.start()
    try:
        assert conn.writer.start == 100.0  # a late gate does not invent a backlog
    finally:
        conn.stop()
        conn._thread.join(5)
    (tmp_path / "out" / "00000000.csv").write_text("a,1,1.0\n")
    resumed, _ = _gated(tmp_path, now)
    open_start_gate(gate, 500.0)
    resumed.start()
    try:
        assert resumed.writer.start == 99.0  # a restart paces from now, whatever the gate says
    finally:
        resumed.stop()
        resumed._thread.join(5)


def test_start_gate_with_garbage_is_a_clear_error(tmp_path):
    gate = tmp_path / "gate"
    gate.write_text("soon")
    with pytest.raises(ConnectorError, match="must hold a wall time"):
        read_start_gate(str(gate))
    assert read_start_gate(str(tmp_path / "absent")) is None


def test_traffic_patterns():
    assert build_traffic("constant", 500).rows_at(7) == 500
    rnd = RandomTraffic(rate=1000, seed=3)
    values = [rnd.rows_at(k) for k in range(2000)]
    assert values == [RandomTraffic(rate=1000, seed=3).rows_at(k) for k in range(2000)]
    assert 980 < sum(values) / len(values) < 1020
    sin = SinusoidalTraffic(rate=1000, amplitude=0.5, period=60)
    assert sin.rows_at(15) == 1500 and sin.rows_at(45) == 500
    with pytest.raises(UnknownNameError, match="valid choices: constant, random, sinusoidal, step"):
        build_traffic("bursty", 10)


def test_step_traffic_is_a_square_wave_with_a_4x_swing():
    step = build_traffic("step", 1000, amplitude=0.6, period=60)
    assert isinstance(step, StepTraffic)
    rows = [step.rows_at(k) for k in range(120)]
    assert rows[:30] == [400] * 30 and rows[30:60] == [1600] * 30 and rows[60:90] == [400] * 30
    assert max(rows) / min(rows) == 4.0 and sum(rows) / len(rows) == 1000
    odd = StepTraffic(rate=100, amplitude=0.5, period=5)  # the step lies at period/2 = 2.5 s
    assert [odd.rows_at(k) for k in range(5)] == [50, 50, 50, 150, 150]
    assert StepTraffic(rate=10, amplitude=1.0, period=4).rows_at(0) == 0


def test_source_options_validation(tmp_path):
    o = SourceOptions.parse({"path": str(tmp_path), "admission": "lmstream", "slide": "5 seconds"})
    assert o.slide == 5.0 and o.state_dir("q1").endswith(os.path.join("_adaptstream", "q1"))
    with pytest.raises(ConfigError, match="unknown adaptstream option"):
        SourceOptions.parse({"path": str(tmp_path), "slid": "5"})
    with pytest.raises(ConfigError, match=r"needs \.option\('path'"):
        SourceOptions.parse({})
    with pytest.raises(ConfigError, match="valid choices: files, generator"):
        SourceOptions.parse({"connector": "kafka"})
    with pytest.raises(ConfigError, match="duration"):
        SourceOptions.parse({"path": str(tmp_path), "slide": "soon"})
    with pytest.raises(ConfigError, match=r"startGate \(generator connector\) do not apply to the files connector"):
        SourceOptions.parse({"path": str(tmp_path), "startGate": str(tmp_path / "gate")})


def test_csv_timestamps_naive_as_utc_offsets_kept_bad_quarantined():
    schema = pa.schema([("k", pa.string()), ("ts", pa.timestamp("us", tz="UTC"))])
    res = parse_csv(b"a,2024-01-01 00:00:05\nb,2024-01-01T01:00:06+01:00\nc,notatime\n", schema)
    assert [r["ts"].isoformat() for r in res.table.to_pylist()] == [
        "2024-01-01T00:00:05+00:00",
        "2024-01-01T00:00:06+00:00",
    ]
    assert [b["row"] for b in res.bad] == [3]
