"""Every report JSON under docs/results names the one invocation it comes from (issue #55).

A report's ``meta`` must hold :data:`adaptstream_bench.meta.REQUIRED`, written by the benchmark itself, and the
JSON a ``targets`` list (empty for a report that judges nothing). Reports recorded before the benchmarks wrote a
complete meta are listed in :data:`RECORDED_WITHOUT_META` with what they lack; the list may only shrink: a listed
report that is re-run (and so complete) fails the test until its line is removed, an unlisted one that is
incomplete fails at once. Nothing here edits a recorded JSON.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from adaptstream.errors import ConfigError
from adaptstream.outdirs import report_dir
from adaptstream_bench.meta import REQUIRED, finish_meta, missing, start_meta

RESULTS = Path(__file__).resolve().parents[2] / "docs" / "results"

#: recorded before git ba7b4ae's universal meta; each to be re-run as one invocation (or deleted), see #55
RECORDED_WITHOUT_META = {
    "mapdevice.json": "no argv, no dirty flag (the lent-GPU run of 13261c5 did not record them)",
}


def _reports() -> list[str]:
    """Every report JSON under docs/results (top level and report folders), archived trials left out."""
    return sorted(str(p.relative_to(RESULTS)) for p in RESULTS.rglob("*.json") if "archive" not in p.parts)


def _gaps(rel: str) -> list[str]:
    doc = json.loads((RESULTS / rel).read_text())
    if not isinstance(doc, dict):
        return ["not a JSON object"]
    gaps = missing(doc.get("meta"))
    if not isinstance(doc.get("targets"), list):
        gaps.append("targets")
    return gaps


@pytest.mark.parametrize("rel", _reports())
def test_every_report_json_names_its_run_and_its_verdicts(rel):
    gaps = _gaps(rel)
    if rel in RECORDED_WITHOUT_META:
        assert gaps, f"{rel} is complete now: remove it from RECORDED_WITHOUT_META"
    else:
        assert gaps == [], f"{rel}: meta or targets incomplete: {gaps}"


def test_the_list_of_reports_without_meta_names_only_reports_that_exist():
    assert set(RECORDED_WITHOUT_META) <= set(_reports())


def test_a_new_run_records_every_required_field(monkeypatch):
    monkeypatch.setattr(sys, "argv", ["adaptstream", "bench", "x", "--rate", "5"])
    meta = finish_meta(start_meta("bench", "x"))
    assert missing(meta) == [] and set(REQUIRED) <= meta.keys()
    assert meta["command"] == "adaptstream bench x --rate 5" and meta["argv"][-1] == "5"
    assert meta["finished"] >= meta["started"] and isinstance(meta["dirty"], bool)


def test_missing_names_what_is_wrong():
    meta = finish_meta(start_meta("bench", "x"))
    assert missing(None) == ["meta"]
    assert missing({k: v for k, v in meta.items() if k != "argv"}) == ["argv"]
    assert missing({**meta, "started": "2026-11-24 10:00 UTC"}) == ["started (seconds since the epoch)"]
    assert missing({**meta, "machine": "host, 2 cores"}) == ["machine.host/cpus"]
    assert missing({**meta, "dirty": None}) == ["dirty (true/false)"]


def test_a_second_run_into_the_same_out_is_refused(tmp_path):
    out = tmp_path / "r"
    assert report_dir("bench-x", out, False, report="x.json") == out
    out.mkdir()
    (out / "x.json").write_text("{}")
    with pytest.raises(ConfigError, match="already holds a report"):
        report_dir("bench-x", out, False, report="x.json")
    assert report_dir("bench-x", out, False) == out  # --report-only rebuilds it in place
    assert report_dir("bench-x", None, True, report="x.json").name == "results"  # --update-docs replaces on purpose


def test_a_rewritten_report_does_not_mark_the_next_run_dirty(tmp_path, monkeypatch):
    import subprocess

    from adaptstream_bench import meta

    def git(*args: str) -> None:
        subprocess.run(["git", "-C", str(tmp_path), *args], check=True, capture_output=True)

    git("init", "-q")
    (tmp_path / "docs" / "results").mkdir(parents=True)
    (tmp_path / "code.py").write_text("x = 1\n")
    (tmp_path / "docs" / "results" / "r.json").write_text("{}\n")
    git("add", ".")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "init")
    monkeypatch.delenv("ADAPTSTREAM_GIT_DIRTY", raising=False)
    monkeypatch.setattr(meta, "ROOT", tmp_path)
    assert meta.git_dirty() is False
    (tmp_path / "docs" / "results" / "r.json").write_text('{"meta": {}}\n')  # what --update-docs rewrites
    assert meta.git_dirty() is False
    (tmp_path / "code.py").write_text("x = 2\n")  # the code a run runs
    assert meta.git_dirty() is True
