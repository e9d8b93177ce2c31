"""The klink benchmark report: targets are computed from the recorded runs (they can be missed), JSON shape."""

from __future__ import annotations

import json

import pytest

from adaptstream_bench.klink_report import saturation_n, targets, write_report


def _run(policy: str, n: int, mean: float, p99: float) -> dict:
    return {
        "policy": policy,
        "queries": n,
        "windows": 8,
        "mean_s": mean,
        "p50_s": mean,
        "p99_s": p99,
        "latencies": [mean] * 8,
        "unfinished": 0,
        "wall_s": 60.0,
        "rows": 1000,
        "rows_per_s": 100.0,
        "controller": {},
        "cpu_ms_per_decision": None,
        "cpu_ms_per_request": None,
        "load_before": [1, 1, 1],
        "load_after": [1, 1, 1],
    }


def _result(klink_mean: float) -> dict:
    runs = [
        _run("default", 2, 5.0, 8.0),
        _run("default", 4, 10.0, 20.0),
        _run("klink", 4, klink_mean, 10.0),
        *(_run(b, 4, 9.0, 15.0) for b in ("fair", "rr", "fcfs", "hr", "sbox")),
    ]
    meta = {
        "command": "adaptstream bench klink",
        "git": "x",
        "machine": {"host": "h", "cpus": 2},
        "load_before": [1.0, 1, 1],
        "load_after": [2.0, 1, 1],
        "started": 0.0,
        "finished": 60.0,
        "duration_s": 40,
        "rate": 400,
        "start_spread_s": 5,
        "queries": [2, 4],
        "policies": ["default", "klink"],
    }
    swm = {
        "ysb/klink-95": {"hits": 97, "checked": 100, "accuracy": 0.97},
        "ysb_zipf/klink-95": {"hits": 90, "checked": 100, "accuracy": 0.90},
    }
    return {"meta": meta, "runs": runs, "swm_replay": swm}


def test_targets_are_met_or_missed_by_the_numbers():
    assert saturation_n(_result(5.0)["runs"]) == 4
    good = {t["target"]: t["met"] for t in targets(_result(5.0))}
    bad = {t["target"]: t["met"] for t in targets(_result(9.5))}
    assert good["klink mean output latency <= 0.6x default at N=4"] is True
    assert bad["klink mean output latency <= 0.6x default at N=4"] is False
    assert (
        good["klink mean below every other baseline at N=4"] and not bad["klink mean below every other baseline at N=4"]
    )
    assert good["klink p99 below every other baseline at N=4"] is True  # 10 < 15
    assert good["SWM inside the 95 % interval (ysb_zipf, replay)"] is False  # 90 % < 95 %


def test_a_baseline_that_did_not_run_misses_the_baseline_targets():
    res = _result(5.0)
    res["runs"] = [r for r in res["runs"] if r["policy"] not in ("fcfs", "hr")]
    by = {t["target"]: t for t in targets(res)}
    for label in ("mean", "p99"):
        t = by[f"klink {label} below every other baseline at N=4"]
        assert t["met"] is False and t["value"] is not None  # klink is below the three that ran ...
        assert t["rule"].endswith("not run, so missed: fcfs, hr")  # ... but two baselines are missing


def test_p99_above_a_baseline_misses_the_p99_target_only():
    res = _result(5.0)
    res["runs"].append(_run("sbox", 4, 6.0, 9.0))  # replaces the N=4 sbox run (by policy and N)
    met = {t["target"]: t["met"] for t in targets(res)}
    assert met["klink mean below every other baseline at N=4"] is True  # 5 < 6
    assert met["klink p99 below every other baseline at N=4"] is False  # 10 > 9


def test_report_files_and_json_shape(tmp_path):
    write_report(_result(5.0), tmp_path)
    doc = json.loads((tmp_path / "klink.json").read_text())
    assert doc["queries"] == 4
    assert doc["policies"]["klink"] == {"mean_ms": 5000.0, "p99_ms": 10000.0}
    assert (tmp_path / "klink-latency.png").exists() and (tmp_path / "klink-cdf.png").exists()
    assert "missed" in (tmp_path / "klink.md").read_text()


def test_mixed_workloads_get_a_per_workload_table_and_their_own_swm_targets(tmp_path):
    res = _result(5.0)
    res["meta"]["workloads"] = ["YSB", "DEBS"]
    for r in res["runs"]:
        r["workloads"] = {
            "YSB": {"windows": 4, "mean_s": 1.5, "p50_s": 1.5, "p99_s": 2.0},
            "DEBS": {"windows": 4, "mean_s": 7.25, "p50_s": 7.0, "p99_s": 9.0},
        }
    res["runs"][2]["controller"] = {"requests": 5, "decisions": 2, "selectivity": {"DEBS": 0.61, "YSB": 0.04}}
    res["swm_replay"]["debs_rides/klink-95"] = {"hits": 99, "checked": 100, "accuracy": 0.99}
    write_report(res, tmp_path)
    md = (tmp_path / "klink.md").read_text()
    assert "of YSB, DEBS" in md and "Per workload at N=4" in md and "7.25 / 9.00 (4 w)" in md
    assert "klink at N=4: DEBS 0.61, YSB 0.04" in md
    met = {t["target"]: t["met"] for t in targets(res)}
    assert met["SWM inside the 95 % interval (debs_rides, replay)"] is True


def test_a_parameter_variant_is_reported_but_is_not_a_baseline(tmp_path):
    res = _result(5.0)
    res["runs"].append(_run("klink:hold=inf", 4, 4.0, 9.0))  # faster than klink: must not count as a baseline
    met = {t["target"]: t["met"] for t in targets(res)}
    assert met["klink mean below every other baseline at N=4"] is True
    write_report(res, tmp_path)
    text = (tmp_path / "klink.md").read_text()
    assert "| klink:hold=inf | n/a | 4.00 / 9.00 (8 w) |" in text
    assert "other work shared the machine" not in text  # load 2.0 on 2 cores


def test_policy_specs_parse_names_and_numbers():
    import math

    import pytest

    from adaptstream.errors import ConfigError
    from adaptstream.scheduling import build_scheduler
    from adaptstream_bench.klink import parse_policy

    assert parse_policy("klink") == ("klink", ())
    name, params = parse_policy("klink:hold=inf;slots=2")
    assert (name, params) == ("klink", (("hold", "inf"), ("slots", "2")))  # strings: the registry coerces them
    policy = build_scheduler(name, **dict(params))
    assert math.isinf(policy.config.hold) and policy.config.slots == 2 and isinstance(policy.config.slots, int)
    assert parse_policy("klink:variance=mean") == ("klink", (("variance", "mean"),))
    with pytest.raises(ConfigError, match="name=value"):
        parse_policy("klink:hold")


def test_repeats_pool_windows_sum_counters_and_show_the_spread(tmp_path):
    from adaptstream_bench.klink import merge_repeats

    a = {**_run("klink", 4, 4.0, 6.0), "latencies": [4.0] * 8, "batches": 10, "workload_latencies": {"YSB": [4.0] * 8}}
    a["controller"] = {"requests": 10, "decisions": 4, "cpu_seconds": 0.004, "holds": 1, "selectivity": {"q": 0.1}}
    b = {**_run("klink", 4, 6.0, 9.0), "latencies": [6.0] * 8, "batches": 12, "workload_latencies": {"YSB": [6.0] * 8}}
    b["controller"] = {"requests": 30, "decisions": 6, "cpu_seconds": 0.006, "holds": 2, "selectivity": {"q": 0.2}}
    failed = {**_run("klink", 4, 0.0, 0.0), "windows": 0, "latencies": [], "error": "boom"}
    m = merge_repeats([a, b, failed])
    assert m["windows"] == 16 and m["mean_s"] == 5.0 and m["batches"] == 22
    assert m["workloads"]["YSB"]["windows"] == 16
    assert m["controller"]["requests"] == 40 and m["controller"]["holds"] == 3
    assert m["controller"]["selectivity"] == {"q": 0.2}
    assert m["cpu_ms_per_decision"] == 1.0
    assert [r["mean_s"] for r in m["repeats"]] == [4.0, 6.0]
    assert m["error"].startswith("1 of 3 repeats failed")
    res = _result(5.0)
    res["meta"]["repeats"] = 2
    res["runs"][2] = m
    write_report(res, tmp_path)
    text = (tmp_path / "klink.md").read_text()
    assert "5.00 / " in text and "run means 4.00-6.00" in text and "2 runs per policy and N" in text
    assert "1 of 3 repeats failed" in text  # listed under the failed runs


def test_repeats_pool_the_latency_breakdown_by_windows_and_the_report_shows_it(tmp_path):
    from adaptstream_bench.klink import merge_repeats

    part = {"input": 3.0, "batch": 0.5, "emit": 0.4}
    a = {**_run("klink", 4, 4.0, 6.0), "breakdown": {"windows": 8, "wait": 1.0, **part}}
    b = {**_run("klink", 4, 6.0, 9.0), "breakdown": {"windows": 24, "wait": 0.2, **part}}
    none = {**_run("klink", 4, 6.0, 9.0), "breakdown": {"windows": 0, "wait": None, "input": None}}
    m = merge_repeats([a, b, none])
    assert m["breakdown"]["windows"] == 32 and m["breakdown"]["wait"] == pytest.approx(0.4)
    res = _result(5.0)
    res["runs"][2] = m
    write_report(res, tmp_path)
    text = (tmp_path / "klink.md").read_text()
    assert "Where the latency goes at N=4" in text and "| klink | 32 | 3.00 | 0.40 | 0.50 | 0.40 | 4.30 |" in text
    assert "| default |" not in text.split("Where the latency goes")[1].split("![")[0]  # no breakdown: no row


def test_report_states_the_klink_settings_the_run_used(tmp_path):
    res = _result(5.0)
    write_report(res, tmp_path)  # a report from before the settings were kept: the old defaults
    assert "`klink` ran with hold=1, overdue=overrun, burst=0: it holds back" in (tmp_path / "klink.md").read_text()
    res["meta"]["klink_defaults"] = {"hold": "inf", "overdue": "zero"}
    write_report(res, tmp_path)
    text = (tmp_path / "klink.md").read_text()
    assert "`klink` ran with hold=inf, overdue=zero, burst=0: it never holds" in text and "`burst`" not in text
    res["meta"]["klink_defaults"] = {"hold": "1", "overdue": "overrun", "burst": "1", "burst_queue": "2"}
    write_report(res, tmp_path)
    assert "up to 1 more concurrent micro-batch(es) to queries whose SWM" in (tmp_path / "klink.md").read_text()


def test_report_counts_every_repeated_run(tmp_path):
    res = _result(5.0)
    write_report(res, tmp_path)
    assert "; 8 runs in 1.0 min." in (tmp_path / "klink.md").read_text()
    res["meta"]["repeats"] = 3
    write_report(res, tmp_path)
    assert "; 24 runs (8 policy x N points, 3 each) in 1.0 min." in (tmp_path / "klink.md").read_text()


def test_a_repetition_starts_only_when_a_whole_one_fits_the_budget():
    """Every policy at an N ends with the same number of runs: a partial repetition would pool an extra, later
    (slower) run for the first policies of the order only."""
    from adaptstream_bench.klink import rep_fits

    assert rep_fits(0.0, None, 60.0)  # the first repetition starts (its runs are checked one by one)
    assert not rep_fits(61.0, None, 60.0)  # the budget is spent
    assert rep_fits(30.0, 25.0, 60.0)  # the last one took 25 s: another fits
    assert not rep_fits(40.0, 25.0, 60.0)  # it would overrun: none of its runs starts


def test_report_compares_klink_with_the_best_baseline_at_every_n(tmp_path):
    res = _result(5.0)
    res["runs"] += [_run("klink", 2, 6.0, 9.0), _run("fcfs", 2, 4.0, 9.5), _run("rr", 2, 5.0, 6.0)]
    text = write_report(res, tmp_path).read_text()
    assert "- N=2: mean 1.50x fcfs's, p99 1.50x rr's" in text
    assert "- N=4 (the targets): mean 0.56x fair's, p99 0.67x fair's" in text


def _cell(policy: str, n: int, means: list[float], late: float = 0.0) -> dict:
    """A pooled cell: each repeat's mean and p99 (1.5x its mean); windows of YSB (10-s slide), ``late`` of them
    written after 12 s (past the slide)."""
    run = _run(policy, n, sum(means) / len(means), 1.5 * max(means))
    lats = [12.0 if i < round(100 * late) else 3.0 for i in range(100)]
    run.update(workload_latencies={"YSB": lats}, repeats=[{"mean_s": m, "p99_s": 1.5 * m, "windows": 8} for m in means])
    return run


@pytest.mark.parametrize(
    ("klink_means", "fcfs_means", "met"),
    [
        ([4.0, 4.2, 4.4], [6.0, 6.5, 7.0], True),  # 0.4x default's, 0.65x fcfs's, repeats apart
        ([4.0, 4.2, 6.2], [6.0, 6.5, 7.0], None),  # medians pass, but a klink run sits inside fcfs's spread
        ([6.0, 6.2, 6.4], [6.0, 6.5, 7.0], False),  # 0.95x fcfs's: above 0.9x
        ([4.0], [6.0, 6.5, 7.0], None),  # one klink run: its spread is unknown
    ],
)
def test_the_scale_rule_is_judged_where_default_misses_deadlines(klink_means, fcfs_means, met):
    from adaptstream_bench.klink_report import scale_targets

    cells = [
        _cell("default", 8, [3.0, 3.1, 3.2], late=0.02),  # 2 % of deadlines missed: not judged at N=8
        _cell("klink", 8, [9.0, 9.0, 9.0]),
        _cell("default", 32, [10.0, 11.0, 12.0], late=0.6),
        _cell("klink", 32, klink_means),
        _cell("fcfs", 32, fcfs_means),
        _cell("sbox", 32, [8.0, 8.0, 8.0]),
    ]
    by: dict = {}
    for c in cells:
        by.setdefault(c["policy"], {})[c["queries"]] = c
    got = scale_targets(by)
    assert [t["target"].split(" (")[0] for t in got] == ["klink mean at N=32", "klink p99 at N=32"]
    assert got[0]["met"] is met and "fcfs" in got[0]["measured"], got[0]
    assert "default missed 60% of deadlines" in got[0]["target"]


def test_a_run_without_default_leaves_the_default_target_undecided():
    """A repeats run of some baselines only (no default) measures nothing against default: undecided, not missed."""
    res = _result(5.0)
    res["runs"] = [r for r in res["runs"] if r["policy"] != "default"]
    (t,) = targets(res)
    assert (t["target"], t["met"], t["value"]) == ("klink vs default", None, None)
