"""bench lmstream-capacity's report: the two targets' verdicts (met, missed, undecided when repeats overlap or
are missing) from recorded-shaped runs, and the report rendered from the JSON alone."""

from __future__ import annotations

import json

import pytest

from adaptstream.errors import ConfigError
from adaptstream_bench.lmstream_capacity import parse_rates
from adaptstream_bench.lmstream_capacity_report import cpu_verdict, share_verdict, targets, write_report


def _run(policy, within, cpu, rate=6000, repeat=0):
    return {"workload": "LR1S", "rate": rate, "policy": policy, "within": within, "cpu_us_per_row": cpu,
            "run_us_per_row": 2 * cpu, "avg_max_latency": 3.0, "p99_latency": 4.0, "thput": 9000.0,
            "repeat": repeat}  # fmt: skip


def _data(lm, asap, repeats=3):
    runs = [_run("lmstream", w, c, repeat=k) for k, (w, c) in enumerate(lm)]
    runs += [_run("asap", w, c, repeat=k) for k, (w, c) in enumerate(asap)]
    meta = {"repeats": repeats, "command": "adaptstream bench lmstream-capacity", "git": "x", "started": 0.0,
            "machine": {"host": "h", "cpus": 2, "python": "3.11"}, "load_before": [1.0, 1.0, 1.0],
            "sizing": "test"}  # fmt: skip
    return {"meta": meta, "runs": runs, "skipped": []}


@pytest.mark.parametrize(
    ("lm", "asap", "met"),
    [
        ([0.98, 0.99, 1.0], [0.98, 0.99, 1.0], True),  # the median and the worst repeat within 2 points
        ([0.97, 0.99, 1.0], [0.98, 0.99, 1.0], None),  # median within, worst repeat 3 points below asap's best
        ([0.60, 0.65, 0.70], [0.78, 0.79, 0.80], False),  # the LR1S at 6000 rows/s shape
        ([0.70, 0.90, 0.99], [0.80, 0.85, 0.95], None),  # the repeats overlap
    ],
)
def test_share_verdict(lm, asap, met):
    assert share_verdict(lm, asap) is met


def test_cpu_verdict():
    assert cpu_verdict([1.0, 1.1], [2.0, 2.2]) is True  # 1.1 <= 0.7 x 2.0
    assert cpu_verdict([1.9, 2.0], [2.0, 2.2]) is False  # 1.9 > 0.7 x 2.2
    assert cpu_verdict([1.0, 1.6], [2.0, 2.2]) is None


def test_targets_per_cell_and_missing_repeats_are_undecided():
    full = _data([(1.0, 1.0)] * 3, [(1.0, 2.0)] * 3)
    got = targets(full)
    assert [t["met"] for t in got] == [True, True]  # both held: the executor-time target is judged too
    short = _data([(1.0, 1.0)] * 2, [(1.0, 2.0)] * 3)
    got = targets(short)
    assert [t["met"] for t in got] == [None, None]
    assert "repeats missing (lmstream: 1 of 3)" in got[0]["measured"]
    # where asap does not hold the bound, only the share target is judged
    assert len(targets(_data([(0.5, 1.0)] * 3, [(0.6, 2.0)] * 3))) == 1


def test_report_renders_from_its_json(tmp_path):
    md = write_report(_data([(0.6, 1.0)] * 3, [(0.8, 2.0)] * 3), tmp_path)
    doc = json.loads((tmp_path / "lmstream_capacity.json").read_text())
    assert [t["met"] for t in doc["targets"]] == [False]
    text = md.read_text()
    assert "**missed**" in text and "| LR1S | 6,000 | lmstream | 3 | 60.0% |" in text
    assert (tmp_path / "lmstream_capacity.png").stat().st_size > 0


def test_rates_option_is_checked():
    assert parse_rates("LR1S:4000,6000;CM2S:16000") == [("LR1S", 4000), ("LR1S", 6000), ("CM2S", 16000)]
    for bad in ("XX:1", "LR1S:", "LR1S:a", "LR1S:0", ""):
        with pytest.raises(ConfigError):
            parse_rates(bad)
