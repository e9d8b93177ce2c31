"""bench reliability: the backlog rule per connector, the combined targets, the report rendered from its JSON alone,
and bad options as ConfigErrors before anything starts."""

from __future__ import annotations

import json

import pytest

from adaptstream.errors import ConfigError
from adaptstream_bench.reliability import reliability_command
from adaptstream_bench.reliability_report import backlog_targets, targets, write_report


def _drain(connector="files", size=1, peak=(100, 400), lost=0, extra=0, rc=0, batches=None):
    return {"connector": connector, "size": size, "rows_per_cap": 1000, "dataset_seconds": size, "exit_status": rc,
            "seconds": 10.0, "batches": size if batches is None else batches, "load": 1.0,
            "peak_rss_mb": {"driver": 100, "jvm": 500, "source": peak[0], "workers": peak[1]},
            "expected": 1000 * size, "got": 1000 * size - lost + extra, "lost": lost, "extra": extra}  # fmt: skip


@pytest.mark.parametrize(
    ("ten", "met"),
    [
        (_drain(size=10, peak=(110, 500)), True),  # 610 / 500 = 1.22x
        (_drain(size=10, peak=(150, 500)), False),  # 650 / 500 = 1.30x
        (_drain(size=10, lost=1), False),
        (_drain(size=10, extra=2), False),
        (_drain(size=10, rc=1), False),
        (_drain(size=10, batches=3), False),  # the cap did not hold: the backlog came in a few large batches
    ],
)
def test_backlog_rule_per_connector(ten, met):
    (t,) = backlog_targets([_drain(), ten])
    assert t["met"] is met


def test_a_missing_drain_is_undecided():
    assert [t["met"] for t in backlog_targets([_drain(), _drain("redis", 10)])] == [None, None]


def _trial(kind="controller", k=0):
    return {"kind": kind, "trial": k, "seed": k, "kill_at_s": 5.0, "killed": "driver session (9 processes)",
            "first_rc": -9, "commits_before_restart": 3, "restart_rc": 0, "restart_s": 12.0, "restart_error": "",
            "unit": "rows", "expected": 100, "got": 100, "lost": 0, "duplicated": 0, "wrong": 0, "load": 1.0,
            "scheduler_state": {"saved_before_restart": True, "restored_offset": "3"}}  # fmt: skip


def _sample(t, rss=100):
    one = {"procs": 1, "rss_mb": rss, "fds": 10, "threads": 5}
    return {"t": t, **{r: dict(one) for r in ("driver", "jvm", "source", "workers")}}


def _data(samples, soak_meta=None):
    meta = {"command": "adaptstream bench reliability", "git": "x", "started": 0.0, "machine": {"host": "h",
            "cpus": 2, "python": "3.11"}, "load_before": [1.0, 1.0, 1.0], "sampled": "test",
            "sizing": {"chaos": "c", "backlog": "b", "soak": "s"}}  # fmt: skip
    return {"meta": meta, "chaos": {"trials": [_trial()], "skipped": []},
            "backlog": {"drains": [_drain(), _drain(size=10)]},
            "soak": {"meta": soak_meta or {"minutes": 10.0, "warmup_minutes": 2.0, "exit_status": 0},
                     "samples": samples}}  # fmt: skip


def test_targets_of_all_three_parts_and_the_report_from_its_json(tmp_path):
    data = _data([_sample(t, 100 if t < 500 else 130) for t in range(0, 600, 10)])
    ts = targets(data)
    assert [t["target"].split()[0] for t in ts] == ["chaos", "backlog"] + ["soak:"] * 12
    assert ts[0]["met"] is True and ts[1]["met"] is True
    assert [t["met"] for t in ts if t["target"].startswith("soak") and "RSS" in t["target"]] == [False] * 4
    write_report(data, tmp_path)
    saved = json.loads((tmp_path / "reliability.json").read_text())
    md = (tmp_path / "reliability.md").read_text()
    assert "restored the state saved at batch count: 3" in md and "| files | 10x the cap" in md
    assert "**missed**" in md and (tmp_path / "reliability.png").stat().st_size > 1000
    saved.pop("targets")
    write_report(saved, tmp_path)
    assert (tmp_path / "reliability.md").read_text() == md


def test_a_report_before_the_soak_has_no_soak_targets(tmp_path):
    data = _data([], {"minutes": 10.0, "warmup_minutes": 2.0})
    assert not [t for t in targets(data) if t["target"].startswith("soak")]
    assert "not run or still running" in (write_report(data, tmp_path)).read_text()


def test_bad_options_are_config_errors():
    with pytest.raises(ConfigError, match="--kinds"):
        reliability_command(kinds="driver")
    with pytest.raises(ConfigError, match="--connectors"):
        reliability_command(connectors="kafka")
    with pytest.raises(ConfigError, match="--warmup-minutes"):
        reliability_command(soak_minutes=3.0, warmup_minutes=2.5)
