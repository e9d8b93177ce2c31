"""Partitioning reports are rendered from their JSON alone, with verdicts computed by the rule written beside them."""

from __future__ import annotations

import json

import pytest

from adaptstream_bench.meta import finish_meta, sample_load, start_meta
from adaptstream_bench.partitioning import render
from adaptstream_bench.partitioning_spark import stem
from adaptstream_bench.partitioning_spark_report import blocks_targets, rate_targets


def _meta(master: str = "local[2]") -> dict:
    meta = start_meta("partitioning", "bench", "rate", master=master)
    sample_load(meta)
    return finish_meta(meta)


def _rate_data(prompt: float, time_: float, hash_: float) -> dict:
    rows = [
        {"interval_s": 2.0, "z": 1.0, "partitioner": "prompt", "max_rate": prompt},
        {"interval_s": 2.0, "z": 1.0, "partitioner": "time", "max_rate": time_},
        {"interval_s": 2.0, "z": 1.0, "partitioner": "hash", "max_rate": hash_},
        {"interval_s": 1.0, "z": 0.5, "partitioner": "prompt", "max_rate": 1.0},  # z < 1: not judged
        {"interval_s": 1.0, "z": 0.5, "partitioner": "time", "max_rate": 9.0},
    ]
    probes = [{"interval_s": 2.0, "z": 1.0, "partitioner": "prompt", "rate": prompt, "sustainable": True}]
    return {
        "bench": "rate",
        "meta": _meta(),
        "config": {"names": ["prompt", "time", "hash"], "blocks": 2, "steps": 4, "lo": 2e4, "hi": 2e6},
        "max": rows,
        "probes": probes,
    }


@pytest.mark.parametrize(
    ("prompt", "time_", "hash_", "verdict"),
    [(400.0, 100.0, 300.0, "met"), (400.0, 100.0, 350.0, "missed"), (150.0, 100.0, 100.0, "missed")],
)
def test_rate_rule(prompt, time_, hash_, verdict):
    import pandas as pd

    (t,) = rate_targets(pd.DataFrame(_rate_data(prompt, time_, hash_)["max"]))
    assert t["verdict"] == verdict
    assert t["vs_time"] == pytest.approx(prompt / time_)
    assert t["vs_best"] == pytest.approx(prompt / max(time_, hash_))


def test_rate_rule_unsustainable_is_not_judged():
    import pandas as pd

    (t,) = rate_targets(pd.DataFrame(_rate_data(0.0, 100.0, 300.0)["max"]))
    assert t["verdict"] == "n/a"


def test_blocks_rule():
    import pandas as pd

    recs = [
        {"workload": "tpch-q3", "blocks": 2, "partitioner": p, "rows/s": v}
        for p, v in {"hash": 100.0, "cam": 140.0, "am": 120.0, "pk2": 40.0, "pk5": 46.0}.items()
    ] + [
        {"workload": "tpch-q3", "blocks": 4, "partitioner": p, "rows/s": v}
        for p, v in {"hash": 100.0, "cam": 140.0, "am": 120.0, "pk2": 50.0, "pk5": 10.0}.items()
    ]
    by_blocks = {t["blocks"]: t for t in blocks_targets(pd.DataFrame(recs))}
    assert by_blocks[2]["verdict"] == "met"  # 1.4x hash, 140/46 = 3.04x PK
    assert by_blocks[4]["verdict"] == "missed"  # 140/50 = 2.8x PK
    assert by_blocks[4]["vs_pk"] == pytest.approx(2.8)


def test_report_is_rendered_from_json_only(tmp_path):
    path = tmp_path / f"{stem('rate', 'spark://127.0.0.1:7077')}.json"
    assert path.name == "partitioning_rate_cluster.json"
    path.write_text(json.dumps(_rate_data(400.0, 100.0, 300.0)))
    md = render(path)
    text = md.read_text()
    assert md.name == "partitioning_rate_cluster.md"
    assert (tmp_path / "partitioning_rate_cluster.png").stat().st_size > 0
    assert "prompt/time = 4.00, prompt/best other = 1.33: **met**" in text
    assert "load average" in text and "git " in text and "local[2]" in text


def test_pure_benchmarks_record_their_run_and_rerender_identically(tmp_path):
    from adaptstream_bench.partitioning import bench_cost, bench_metrics

    for md in (bench_metrics(rows=2000, num_blocks=4, out_dir=tmp_path), bench_cost(2000, [4], out_dir=tmp_path)):
        data = json.loads(md.with_suffix(".json").read_text())
        assert data["meta"]["git"] and "load_after" in data["meta"] and data["records"]
        first = md.read_text()
        assert render(md.with_suffix(".json")).read_text() == first
