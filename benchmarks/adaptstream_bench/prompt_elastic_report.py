"""Report of ``adaptstream bench prompt-elastic``: per-policy figures, targets, Markdown and PNG timelines, all
computed from the recorded runs in the JSON (and only from them).

``python -m adaptstream_bench.prompt_elastic_report DIR`` rebuilds the figures, the Markdown and the plots from
``DIR/prompt_elastic.json``.
"""

from __future__ import annotations

import itertools
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from adaptstream_bench.meta import dirty_note, targets_table

NAME = "prompt_elastic"
POLICIES = ("prompt", "prompt_fast", "ds2", "static_peak", "static_mean", "dynamic_allocation")
ON_TIME_TARGET = 0.95  # share of batches with W <= 1 after the warm-up (issue #9)
SHARE_OF_PEAK = 0.60  # prompt's executor-seconds / static peak's
EQUAL_TOLERANCE = 0.05  # "equal or lower" executor-seconds, within this relative margin
STEP_INTERVALS = 2.0  # prompt plans a scale-out within this many batch intervals of a step's rise (issue #56)


def executor_seconds(intervals: list[dict], start: float, end: float) -> float:
    """Integral of live executors over [start, end]; an executor never removed counts until ``end``."""
    total = 0.0
    for iv in intervals:
        removed = iv["removed"] if iv["removed"] is not None else end
        total += max(0.0, min(end, removed) - max(start, iv["added"]))
    return total


def counted(run: dict) -> list[dict]:
    """The run's batches after the warm-up (those that started at or after ``window[0]``)."""
    return [b for b in run["batches"] if b["started"] >= run["window"][0]]


def run_figures(run: dict) -> dict:
    """One run (policy x pattern): on-time share, executor-seconds over its measurement window, and context."""
    bs = counted(run)
    w = [b["w"] for b in bs]
    start, end = run["window"]
    es = executor_seconds(run["executors"], start, end)
    lat = [d["latency"] for d in run.get("datasets", []) if d["arrival"] >= start]
    return {
        **scale_actions(run),
        "batches": len(bs),
        "on_time": sum(1 for x in w if x <= 1.0),
        "on_time_share": (sum(1 for x in w if x <= 1.0) / len(w)) if w else None,
        "executor_seconds": es,
        "window_s": end - start,
        "mean_executors": es / (end - start) if end > start else None,
        "w_median": float(np.median(w)) if w else None,
        "w_max": max(w) if w else None,
        "latency_p95_s": float(np.percentile(lat, 95)) if lat else None,
    }


def scale_actions(run: dict) -> dict:
    """What the policy planned (executor counts in its plans, rises and falls between consecutive batches) and
    what Spark did (executors added and removed from the run's first input to the end of its window)."""
    planned = [b["planned_executors"] for b in run["batches"] if b.get("planned_executors") is not None]
    t0, end = run["t0"], run["window"][1]
    return {
        "max_executors_planned": max(planned) if planned else None,
        "min_executors_planned": min(planned) if planned else None,
        "planned_scale_outs": sum(1 for x, y in itertools.pairwise(planned) if y > x),
        "planned_scale_ins": sum(1 for x, y in itertools.pairwise(planned) if y < x),
        "scale_outs": sum(1 for iv in run["executors"] if t0 < iv["added"] <= end),
        "scale_ins": sum(1 for iv in run["executors"] if iv["removed"] is not None and t0 < iv["removed"] <= end),
    }


def step_delays(run: dict, period: float) -> list[dict]:
    """Per rise of a ``step`` run's rate (event time period x (j + 1/2) from the first input): seconds until the
    policy first planned more executors than before the rise (the end of that batch) and until Spark added one,
    None where neither happened before the rate fell again."""
    out = []
    t0, end = run["t0"], run["window"][1]
    rise = t0 + period / 2
    while rise < end:
        fall = rise + period / 2
        before = [b["planned_executors"] for b in run["batches"] if b["started"] < rise and b.get("planned_executors")]
        base = before[-1] if before else None
        plan = next(
            (b["ended"] for b in run["batches"] if rise <= b["started"] < fall and base is not None
             and (b.get("planned_executors") or 0) > base),
            None,
        )  # fmt: skip
        added = min((iv["added"] for iv in run["executors"] if rise <= iv["added"] < fall), default=None)
        out.append(
            {"rise": rise - t0, "planned_before": base, "planned_s": None if plan is None else plan - rise,
             "added_s": None if added is None else added - rise}
        )  # fmt: skip
        rise += period
    return out


def policy_figures(runs: list[dict]) -> dict:
    """Per policy: figures over all its runs (batches pooled, executor-seconds summed) and per pattern."""
    out: dict[str, dict] = {}
    for name in dict.fromkeys(r["policy"] for r in runs):
        mine = [r for r in runs if r["policy"] == name]
        per = {r["pattern"]: run_figures(r) for r in mine}
        batches = sum(f["batches"] for f in per.values())
        on_time = sum(f["on_time"] for f in per.values())
        es = sum(f["executor_seconds"] for f in per.values())
        window = sum(f["window_s"] for f in per.values())
        acts = list(per.values())
        planned_max = [f["max_executors_planned"] for f in acts if f["max_executors_planned"] is not None]
        planned_min = [f["min_executors_planned"] for f in acts if f["min_executors_planned"] is not None]
        out[name] = {
            "max_executors_planned": max(planned_max) if planned_max else None,
            "min_executors_planned": min(planned_min) if planned_min else None,
            **{
                k: sum(f[k] for f in acts)
                for k in ("scale_outs", "scale_ins", "planned_scale_outs", "planned_scale_ins")
            },
            "on_time_share": on_time / batches if batches else None,
            "executor_seconds": es,
            "batches": batches,
            "mean_executors": es / window if window > 0 else None,
            "by_pattern": per,
        }
    return out


def targets(
    policies: dict, trigger: float | None = None, workers: int | None = None, subject: str = "prompt"
) -> list[dict]:
    """The issue's elasticity targets for ``subject`` (Alg. 4, or our variant ``prompt_fast`` judged by the same
    rules); each verdict computed here (None: a policy it needs was not run). With the batch interval, also the
    step response (#56): needs ``step_delays`` on the subject's figures."""
    p, peak, da = policies.get(subject), policies.get("static_peak"), policies.get("dynamic_allocation")
    out: list[dict[str, Any]] = []
    rule1 = (
        f"{subject}'s on-time share (batches with W <= 1 after the warm-up, all patterns pooled) >= "
        f"{ON_TIME_TARGET:.0%} and its executor-seconds (Spark's executor add/remove times integrated over the "
        f"measurement windows) <= {SHARE_OF_PEAK:.0%} of static_peak's"
    )
    if p is None or peak is None or p["on_time_share"] is None or not peak["executor_seconds"]:
        out.append({"target": f"{subject} vs static peak", "rule": rule1, "measured": "not run", "met": None})
    else:
        share = p["executor_seconds"] / peak["executor_seconds"]
        out.append(
            {
                "target": f"{subject} vs static peak",
                "rule": rule1,
                "measured": f"on time {p['on_time_share']:.1%}; executor-seconds {p['executor_seconds']:.0f} = "
                f"{share:.0%} of static_peak's {peak['executor_seconds']:.0f}",
                "met": bool(p["on_time_share"] >= ON_TIME_TARGET and share <= SHARE_OF_PEAK),
            }
        )
    rule2 = (
        f"{subject}'s on-time share > dynamic_allocation's, with {subject}'s executor-seconds <= "
        f"dynamic_allocation's (equal within {EQUAL_TOLERANCE:.0%})"
    )
    target2 = f"{subject} vs Spark dynamic allocation"
    if p is None or da is None or p["on_time_share"] is None or da["on_time_share"] is None:
        out.append({"target": target2, "rule": rule2, "measured": "not run", "met": None})
    else:
        out.append(
            {
                "target": target2,
                "rule": rule2,
                "measured": f"on time {p['on_time_share']:.1%} vs {da['on_time_share']:.1%}; executor-seconds "
                f"{p['executor_seconds']:.0f} vs {da['executor_seconds']:.0f}",
                "met": bool(
                    p["on_time_share"] > da["on_time_share"]
                    and p["executor_seconds"] <= da["executor_seconds"] * (1 + EQUAL_TOLERANCE)
                ),
            }
        )
    if trigger is not None:  # the targets issue #56 added (rules of that issue, beside #9's above)
        out.append(da_target_56(p, da, subject))
        out.append(step_target(p, trigger, workers, subject))
    return out


def da_target_56(p: dict | None, da: dict | None, subject: str = "prompt") -> dict:
    """Issue #56's form of the comparison with dynamic allocation: on-time share >= its, executor-seconds <= its."""
    rule = f"{subject}'s on-time share >= dynamic_allocation's and {subject}'s executor-seconds <= dynamic_allocation's"
    target = f"{subject} vs Spark dynamic allocation (#56: at least as on time, no more executor-seconds)"
    if p is None or da is None or p["on_time_share"] is None or da["on_time_share"] is None:
        return {"target": target, "rule": rule, "measured": "not run", "met": None}
    return {
        "target": target,
        "rule": rule,
        "measured": f"on time {p['on_time_share']:.1%} vs {da['on_time_share']:.1%}; executor-seconds "
        f"{p['executor_seconds']:.0f} vs {da['executor_seconds']:.0f}",
        "met": bool(p["on_time_share"] >= da["on_time_share"] and p["executor_seconds"] <= da["executor_seconds"]),
    }


def _delay_text(d: dict) -> str:
    def sec(x: float | None) -> str:
        return "never" if x is None else f"{x:.1f} s"

    return f"rise at {d['rise']:.0f} s: plan after {sec(d['planned_s'])}, executor added after {sec(d['added_s'])}"


def step_target(p: dict | None, trigger: float, workers: int | None, subject: str = "prompt") -> dict:
    """The subject plans more executors within STEP_INTERVALS batch intervals of every rise of the step rate (rises
    where its plan already had every worker are left out); Spark's executor add times are shown beside."""
    limit = STEP_INTERVALS * trigger
    rule = (
        f"at every rise of the step rate, {subject}'s plan asks for more executors by the end of a batch that ends "
        f"within {STEP_INTERVALS:g} batch intervals ({limit:g} s) of the rise; rises where the plan already had "
        "every worker are left out"
    )
    target = f"{subject} scales out within {STEP_INTERVALS:g} batch intervals of a step"
    delays = (p or {}).get("step_delays") or []
    judged = [d for d in delays if workers is None or d.get("planned_before") is None or d["planned_before"] < workers]
    if not judged:
        return {"target": target, "rule": rule, "measured": "no step rise to judge", "met": None, "threshold": limit}
    worst = [d["planned_s"] for d in judged]
    met = all(x is not None and x <= limit for x in worst)
    measured = "; ".join(_delay_text(d) for d in judged)
    return {"target": target, "rule": rule, "measured": measured, "met": met, "threshold": limit}


def complete(r: dict) -> dict:
    """The report document with its per-policy figures and targets computed from the runs: Alg. 4's, and where
    it ran, our variant's by the same rules (beside them, not instead)."""
    policies = policy_figures(r["runs"])
    c = r.get("meta", {}).get("config", {})
    if "period" in c:
        for x in r["runs"]:
            if x["pattern"] == "step" and x["policy"] in policies:
                policies[x["policy"]]["step_delays"] = step_delays(x, c["period"])
    judged = ["prompt", *(["prompt_fast"] if "prompt_fast" in policies else [])]
    found = [t for s in judged for t in targets(policies, c.get("trigger"), c.get("workers"), s)]
    return {**r, "policies": policies, "targets": found}


def _sizing_capacity(r: dict) -> str:
    """Whether executors lowered W, from the sizing runs (the two static baselines got the same size here)."""
    c = r["meta"]["config"]
    trials = [t for t in (r["meta"].get("sizing") or {}).get("trials", []) if t.get("w_median") is not None]
    by_rate: dict[str, dict[int, float]] = {}
    for t in trials:
        by_rate.setdefault(t["rate_label"], {})[t["executors"]] = t["w_median"]
    parts = [
        f"{label} rate: " + ", ".join(f"{w:.2f} with {k}" for k, w in sorted(ws.items()))
        for label, ws in by_rate.items()
        if len(ws) > 1
    ]
    text = (
        f"Do executors lower W here? Both static baselines got {c['static_peak']} executor(s), so they cannot tell; "
        "the sizing runs can (median W by executor count"
    )
    return text + (f": {'; '.join(parts)})." if parts else ": none recorded).")


def _route(c: dict) -> str:
    """How the workload ran: the pane mode, or a user's application under ``adaptstream.tune``."""
    if c.get("route", "pane") == "pane":
        return f"in the pane execution mode (`adaptstream run --reduce {c['reduce']}`)"
    return (
        "as a user's application under `adaptstream.tune` (app route): LR2S's windowed aggregation by Spark itself, "
        f"behind a Python UDF doing {c['row_work']} chained SHA-256 digests per row (synthetic per-row work, real "
        "executor CPU)"
    )


def _span(f: dict) -> str:
    lo, hi = f.get("min_executors_planned"), f.get("max_executors_planned")
    return "n/a" if lo is None else f"{lo}-{hi}"


def _caps(c: dict) -> str:
    if c.get("cpu_pct") is None and c.get("mem_mb") is None:
        return " (not capped: the workers share the machine's cores)"
    cpu = c.get("cpu_pct")
    return (
        f", each capped (cgroup v1) at {'100' if cpu is None else f'{cpu:g}'} % of one core and {c['mem_mb']} MB, so "
        "that capacity grows with the executor count (docs/cluster.md)"
    )


def _sizing_lines(r: dict) -> list[str]:
    sz = r["meta"].get("sizing")
    if not sz:
        return []
    lines = [
        "",
        "## Sizing runs (the static baselines' rule)",
        "",
        "Constant-rate runs before the measured ones, in the same application: at the peak rate with k static "
        "executors from every worker's down, then at the mean rate from the peak's size down, each sweep stopping at "
        "the first count that let a counted batch run late (W > 1); the size is the smallest count before it "
        "(an executor added between the two sweeps is warmed first, unrecorded, so none started cold in a sizing "
        "run). Chosen: "
        f"peak {sz['sizes'].get('peak')}, mean {sz['sizes'].get('mean')} (None: no count did; every worker then).",
        "",
        "| rate | rows/s | executors | on time | batches | median W | max W |",
        "|---|---|---|---|---|---|---|",
    ]
    for t in sz["trials"]:
        lines.append(
            f"| {t['rate_label']} | {t['rate']:,} | {t['executors']} | {_fmt(t['on_time_share'], '.0%')} | "
            f"{t['batches']} | {_fmt(t['w_median'], '.2f')} | {_fmt(t['w_max'], '.2f')} |"
            + (f" {t['error']}" if t.get("error") else "")
        )
    return lines


def _fmt(x: float | None, spec: str) -> str:
    return "n/a" if x is None else format(x, spec)


def _plot(r: dict, pattern: str, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    runs = [x for x in r["runs"] if x["pattern"] == pattern]
    fig, axes = plt.subplots(4, 1, figsize=(8, 8.5), sharex=True)
    ax_rate, ax_exec, ax_tasks, ax_w = axes
    for k, run in enumerate(runs):
        t0 = run["t0"]
        color = f"C{k}"
        if k == 0:  # the same seeded input for every policy: one rate curve
            ds = run.get("datasets", [])
            ax_rate.plot([d["arrival"] - t0 for d in ds], [d["rows"] for d in ds], "k-", lw=1)
        end = run["window"][1]
        grid = np.linspace(0, end - t0, 400)
        live = [
            sum(
                1
                for iv in run["executors"]
                if iv["added"] <= t0 + g and (iv["removed"] is None or t0 + g < iv["removed"])
            )
            for g in grid
        ]
        ax_exec.step(grid, np.asarray(live) + 0.04 * k, where="post", color=color, label=run["policy"])
        bs = run["batches"]
        x = [b["started"] - t0 for b in bs]
        ax_tasks.step(x, [b["reduce_buckets"] for b in bs], where="post", color=color)
        ax_tasks.step(x, [b["map_tasks"] for b in bs], where="post", color=color, ls=":", alpha=0.7)
        ax_w.plot(x, [b["w"] for b in bs], ".-", color=color, ms=3, lw=0.8)
    for ax in axes:
        ax.axvline(runs[0]["window"][0] - runs[0]["t0"], color="grey", lw=0.6, ls="--") if runs else None
    ax_rate.set_ylabel("input rows/s")
    ax_exec.set_ylabel("live executors")
    ax_exec.legend(fontsize=7, loc="upper left")
    ax_tasks.set_ylabel("reduce buckets\n(map tasks dotted)")
    ax_w.axhline(1.0, color="red", lw=0.8)
    ax_w.set_ylabel("W = batch time /\nbatch interval")
    ax_w.set_xlabel("seconds since the first input (dashed: end of warm-up)")
    fig.suptitle(f"{pattern} rate: executors, tasks and W per policy", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def policy_notes(c: dict) -> dict[str, str]:
    """What each policy did in a run of this revision; stored in the JSON's meta so a report re-rendered later
    describes the run's policies, not the report writer's."""
    app = c.get("route", "pane") == "app"
    does = "asks" if app else "sets the next batch's reduce buckets and asks"
    return {
        "prompt": "- `prompt`: Alg. 4 (`--elastic prompt`): W = batch time / batch interval, thres 0.9, step 0.1, "
        f"d = 3, grace 3; it {does} Spark for executors (`requestTotalExecutors` / `killExecutor`), between 1 and "
        f"{c['workers']}; starts at {c['prompt_initial']}.",
        "prompt_fast": "- `prompt_fast` (ours, not the paper's; where run): Alg. 4 plus an onset rule: a batch whose "
        "arrival rate (rows per second since the previous data batch started) grew by more than 5 % over the "
        "previous batch's and whose W x that growth exceeds thres adds map tasks at once, to tasks x predicted W / "
        "thres (at least one more, at most double); the batch right after such a decision does not fire it again; "
        "same bounds and start as `prompt` (the version at git 32a56fe compared raw row counts and grew reduce "
        "buckets too).",
        "ds2": "- `ds2`: a DS2-style rate-based controller (`--elastic ds2`, the modern anchor): executors = "
        "ceil(executors x mean W over 3 batches / 0.8), two batches skipped after each decision, between 1 and "
        f"{c['workers']}; map tasks and reduce buckets follow the executors; starts at the mean's plan.",
        "static_peak": f"- `static_peak`: {c['static_peak']} executors and reduce buckets throughout (what the peak "
        f"needs under this sizing rule: {c['peak_rule']}).",
        "static_mean": f"- `static_mean`: {c['static_mean']} executors and reduce buckets throughout "
        f"({c['mean_rule']}).",
        "dynamic_allocation": "- `dynamic_allocation`: Spark's own `spark.dynamicAllocation.enabled=true` with "
        f"shuffle tracking, min 1 / max {c['workers']} executors, {c['da_conf_note']}, {c['workers']} reduce "
        "buckets, a Spark application of its own.",
    }


def policy_lines(m: dict, c: dict) -> list[str]:
    """The run's policy descriptions from its meta; a JSON written before they were recorded gets today's, named
    as such."""
    notes = m.get("policy_notes")
    head = []
    if notes is None:
        notes = policy_notes(c)
        head = ["(The JSON records no policy descriptions; these are the report writer's at rendering time.)", ""]
    ran = {r for r in m.get("config", {}).get("policies", [])} or set(notes)
    return head + [text for name, text in notes.items() if name in ran or name not in POLICIES]


def markdown(r: dict) -> str:
    m, c = r["meta"], r["meta"]["config"]
    pol = r["policies"]
    patterns = list(dict.fromkeys(x["pattern"] for x in r["runs"]))
    app = c.get("route", "pane") == "app"
    lines = [
        "# Prompt's elasticity (Alg. 4) against static provisioning and Spark's dynamic allocation (Fig. 12 shape)",
        "",
        f"Recorded run: `{m['command']}` at git `{m['git']}`{dirty_note(m)} "
        f"on {m['machine']['host']} ({m['machine']['cpus']} "
        f"cores), {time.strftime('%Y-%m-%d %H:%M', time.gmtime(m['started']))} UTC, {m['wall_s'] / 60:.1f} min "
        f"wall; load average before {m['load_before'][0]:.2f} / after {m['load_after'][0]:.2f} / mean "
        f"{_fmt(m.get('load_mean'), '.2f')} (1-min load sampled every {c['load_sample_s']:g} s).",
        "",
        f"Set-up: a real Spark standalone cluster on 127.0.0.1 (`scripts/cluster.sh`): {c['workers']} workers of 1 "
        f"core and {c['worker_memory']}{_caps(c)}, executors of 1 core and {c['executor_memory']}. Workload "
        f"{c['workload']} "
        f"{_route(c)}, fixed admission every "
        f"{c['trigger']:g} s (the batch interval), "
        + (
            f"{c['num_blocks']} input blocks (map tasks) at the start, then each policy's planned map tasks (see the "
            "notes), "
            if app is False
            else f"{c['num_blocks']} input blocks and {c['workers']} shuffle partitions throughout (the plans set "
            "executors only), "
        )
        + f"generated input (seed {c['seed']}) at a mean of {c['rate']:,} rows/s with amplitude {c['amplitude']:g} "
        f"(a {(1 + c['amplitude']) / (1 - c['amplitude']):.1f}x swing) and period {c['period']:g} s, "
        f"{c['duration']:g} s of input per run; the first {c['warmup']:g} s of input are a warm-up and not counted. "
        + ("" if app else f"Key count: {c['key_note']}"),
        "",
        "Policies (same input for each, one run per policy and pattern):",
        "",
        *policy_lines(m, c),
        "",
        (
            "Measured: per batch W from the pane executor's own timing (the batch's Spark jobs, start to end); "
            if c.get("route", "pane") == "pane"
            else "Measured: per batch W from Spark's progress (triggerExecution / batch interval); "
        )
        + "executor-seconds by integrating the executors Spark itself lists (status store: add and remove time of "
        "every executor of the application) over each run's measurement window (end of warm-up to the end of its "
        "last batch); the input rate from the generator's datasets.",
        "",
        "## Targets",
        "",
        *targets_table([(t["target"], t["rule"], t["measured"], t["met"]) for t in r["targets"]], "undecided"),
    ]
    lines += [
        "",
        "## Per policy",
        "",
        "| policy | on time (W <= 1) | executor-seconds | mean executors | batches | planned executors min-max | "
        "scale-outs / scale-ins (Spark) | (planned) | "
        + " | ".join(f"{p}: on time / exec-s / median W / max W / p95 latency s" for p in patterns)
        + " |",
        "|---|---|---|---|---|---|---|---|" + "---|" * len(patterns),
    ]
    for name in [p for p in POLICIES if p in pol] + [p for p in pol if p not in POLICIES]:
        f = pol[name]
        cells = []
        for p in patterns:
            g = f["by_pattern"].get(p)
            cells.append(
                "n/a"
                if g is None
                else f"{_fmt(g['on_time_share'], '.0%')} / {g['executor_seconds']:.0f} / {_fmt(g['w_median'], '.2f')}"
                f" / {_fmt(g['w_max'], '.2f')} / {_fmt(g['latency_p95_s'], '.1f')}"
            )
        lines.append(
            f"| {name} | {_fmt(f['on_time_share'], '.1%')} | {f['executor_seconds']:.0f} | "
            f"{_fmt(f['mean_executors'], '.2f')} | {f['batches']} | {_span(f)} | "
            f"{f.get('scale_outs', 'n/a')} / {f.get('scale_ins', 'n/a')} | "
            f"{f.get('planned_scale_outs', 'n/a')} / {f.get('planned_scale_ins', 'n/a')} | " + " | ".join(cells) + " |"
        )
    lines += _sizing_lines(r)
    lines += ["", "## Checks computed from the runs", "", *[f"- {c}" for c in checks(r)]]
    for p in patterns:
        lines += ["", f"![{p} timeline]({NAME}-{p}.png)"]
    lines += ["", "## Notes", "", *[f"- {n}" for n in m.get("notes", [])]]
    return "\n".join(lines) + "\n"


def checks(r: dict) -> list[str]:
    """Sentences about the set-up that the recorded runs confirm or refute (computed, not asserted)."""
    out = []
    p = r["policies"].get("prompt")
    if p is not None and "scale_outs" in p:
        both = p["planned_scale_outs"] > 0 and p["planned_scale_ins"] > 0
        out.append(
            f"Does Alg. 4 scale both ways? Its plans rose {p['planned_scale_outs']} and fell "
            f"{p['planned_scale_ins']} time(s) (executors planned {_span(p)}); Spark added {p['scale_outs']} and "
            f"removed {p['scale_ins']} executor(s) during its runs: "
            + ("both scale-out and scale-in were exercised." if both else "not both directions were exercised.")
        )
    peak = r["policies"].get("static_peak")
    if peak is not None and peak["on_time_share"] is not None:
        ok = peak["on_time_share"] >= ON_TIME_TARGET
        out.append(
            f"Sizing check: static_peak kept {peak['on_time_share']:.1%} of its batches on time with "
            f"{r['meta']['config']['static_peak']} executor(s): "
            + (
                "they did serve the peak."
                if ok
                else "they did not serve the peak on this machine (the sizing premise does not hold here), so the "
                "targets measure an overloaded set-up."
            )
        )
    med = {
        name: float(np.median(ws))
        for name in ("static_peak", "static_mean")
        if (ws := [b["w"] for x in r["runs"] if x["policy"] == name for b in counted(x)])
    }
    c = r["meta"]["config"]
    if len(med) == 2 and c["static_peak"] == c["static_mean"]:
        out.append(_sizing_capacity(r))
    elif len(med) == 2:
        lower = med["static_peak"] < 0.95 * med["static_mean"]
        out.append(
            f"Do executors lower W here? Median W over the counted batches: {med['static_peak']:.2f} with "
            f"{c['static_peak']} executors (static_peak) vs {med['static_mean']:.2f} with {c['static_mean']} "
            "(static_mean): "
            + (
                f"more executors lowered W by {1 - med['static_peak'] / med['static_mean']:.0%}."
                if lower
                else "more executors did not lower W (less than 5 % lower, or higher): at these rates a batch's "
                "time is mostly fixed per-job cost, not work that more executors share, so this run shows what "
                "each policy pays in executors more than how well it follows the load."
            )
        )
    firsts = [x for x in r["runs"] if x["policy"] != "dynamic_allocation"][:1] + [
        x for x in r["runs"] if x["policy"] == "dynamic_allocation"
    ][:1]
    cold = []
    for x in firsts:
        first = next((b for b in x["batches"] if b["rows"] > 0), None)
        if first is not None:
            cold.append(
                f"{x['pattern']}/{x['policy']}: W = {first['w']:.2f} at {first['started'] - x['t0']:.0f} s "
                f"({'counted' if first['started'] >= x['window'][0] else 'in the warm-up'})"
            )
    if cold:
        out.append(
            "First data batch of each Spark application's first measured run (a cold start shows as a large W "
            "whose backlog spills into the counted batches): " + "; ".join(cold) + "."
        )
    errors = [f"{x['pattern']}/{x['policy']}: {x['error']}" for x in r["runs"] if "error" in x]
    if errors:
        out.append("Failed runs (no batches counted): " + "; ".join(errors))
    for x in r["runs"][:1]:
        keys = [b["keys"] for b in counted(x) if b.get("keys") is not None]  # the app route has none
        if keys:
            out.append(
                f"Distinct keys per counted batch ({x['pattern']}/{x['policy']}): first {keys[0]:,}, "
                f"min {min(keys):,}, max {max(keys):,}."
            )
    return out


def write_report(r: dict, target: Path) -> dict:
    """Compute the figures and targets, write JSON, Markdown and one PNG per pattern; return the document."""
    doc = complete(r)
    target.mkdir(parents=True, exist_ok=True)
    (target / f"{NAME}.json").write_text(json.dumps(doc, indent=1))
    for p in dict.fromkeys(x["pattern"] for x in doc["runs"]):
        _plot(doc, p, target / f"{NAME}-{p}.png")
    (target / f"{NAME}.md").write_text(markdown(doc))
    return doc


if __name__ == "__main__":
    d = Path(sys.argv[1])
    write_report(json.loads((d / f"{NAME}.json").read_text()), d)
