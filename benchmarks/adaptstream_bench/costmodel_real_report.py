"""costmodel_real.md / .json / .png from `costmodel_real_eval.run`'s result: every figure from real testbed runs."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from adaptstream.costmodel.train import METRICS, SHORT
from adaptstream_bench.costmodel_real_eval import BASE_TYPES, MODELS
from adaptstream_bench.meta import describe, dirty_note, load_text, missing, targets_table

SHORTS = tuple(SHORT[m] for m in METRICS)

Q_TARGET = 1.5
ACC_TARGET = 0.90
SPEEDUP_TARGET = 2.0
MAIN = "selected"  # before git 1316912 the targets judged "sim_fine_tuned"; it is still scored beside
#: the Exp. 2 invocation the placement targets judge: `testbed-corpus --chooser gnn,flat,random --label cmp` on
#: queries no chooser had run, with models `eval-real --models-only` trained; fixed before it ran (issue #55)
EXP2_GROUP = "cmp"
#: median ratio of Lp between two runs of the same trace (docs/results/costmodel_repeat.json, 140 pairs): a
#: placement figure within this factor of its threshold is undecided
RUN_TO_RUN_LP = 1.116
LABELS = {
    "sim_zero_shot": "GNN trained on SIMULATED traces only (zero-shot)",
    "sim_fine_tuned": "same GNN fine-tuned on the real training folds",
    "real_only": "GNN trained on the real training folds only ({members}){prior}",
    "both_gnns": "the fine-tuned and the real-only GNN's members pooled: mean value; for R_O and S mean "
    "probability cut at 0.5",
    "selected": "per metric, the fine-tuned or the real-only GNN, whichever predicted held-back queries of the "
    "training folds better (20 % of their queries; the test fold is never looked at); {pooled}",
    "flat_real": "flat-vector LightGBM on the real training folds",
    "prior_alone": "the load prior alone, no GNN: a logistic regression on the busiest host's load per core and per "
    "MB, fitted on the real training folds (costmodel/loadprior.py; R_O and S only)",
}


def _label(model: str, res: dict[str, Any]) -> str:
    k = int(res["config"].get("real_members", 1))  # reports before the ensemble had one member
    pooled = (res.get("selection") or {}).get("pooled") or []  # none before 2026-11-28
    both = (
        f"for {', '.join(pooled)} `both_gnns` instead, no choice (a rule set after out-of-fold scores of this "
        "corpus, eval-real's folds among them, had been seen: docs/testbed.md)"
        if pooled
        else "no metric pooled"
    )
    priors = res["config"].get("class_prior") or []  # none before 2026-11-29 (fourth update)
    prior = (
        f"; for {', '.join(priors)} its logit, and the fine-tuned GNN's, is added to a logistic regression on the "
        "busiest host's load per core and per MB, fitted on the same folds (costmodel/loadprior.py)"
        if priors
        else ""
    )
    members = f"{k} seeds, majority vote / mean" if k > 1 else "one seed"
    return LABELS[model].format(members=members, pooled=both, prior=prior)


def _seed_spread(res: dict[str, Any]) -> list[str]:
    """One line: the range of each figure over the real-only ensemble's members scored alone."""
    per: list[dict[str, Any]] = next(iter(res.get("real_only_seeds", {}).values()), [])
    if len(per) < 2:
        return []
    keys = {k: "q50" for k in ("T", "Le", "Lp")} | {k: "balanced_acc" for k in ("R_O", "S")}
    spans = []
    for k, field in keys.items():
        vals = [sc[k].get(field) for sc in per if sc[k].get(field) is not None]
        spans.append(f"{k} {_f(min(vals))}-{_f(max(vals))}" if vals else f"{k} -")
    return [f"- the {len(per)} members of `real_only`, each scored alone (same folds): " + ", ".join(spans)]


def main_model(res: dict[str, Any]) -> str:
    """The model the targets judge: the per-metric choice where it was run, else the fine-tuned or real-only GNN."""
    return next(m for m in (MAIN, "sim_fine_tuned", "real_only") if m in res["cv"])


def _f(v: Any, nd: int = 2) -> str:
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return "-"
    return f"{v:.{nd}f}" if isinstance(v, float) else str(v)


def judged(res: dict[str, Any], m: str) -> tuple[dict[str, float | None], dict[str, str], int]:
    """The figures the targets judge for model `m`: the mean over the fold partitions where eval-real scored
    several (`--partitions`), else the one partition's; with each figure's range as text ("" for one partition),
    and the number of partitions."""
    parts = res.get("partitions") or {}
    if int(parts.get("n", 1)) > 1 and m in parts.get("mean", {}):
        mean = parts["mean"][m]
        span = {k: f" ({_f(v['min'])}-{_f(v['max'])})" if v["n"] else "" for k, v in mean.items()}
        return {k: v["mean"] for k, v in mean.items()}, span, int(parts["n"])
    full = res["cv"][m][max(res["cv"][m], key=float)]
    figs = {k: full[k].get("q50") for k in ("T", "Le", "Lp")} | {k: full[k].get("balanced_acc") for k in ("R_O", "S")}
    figs["S_other_rule"] = (full.get("S_other_rule") or {}).get("balanced_acc")
    return figs, dict.fromkeys(figs, ""), 1


def _band(values: dict[str, float | None], threshold: float, spread: float, higher: bool = True) -> bool | None:
    """Met when every value clears `threshold` by the factor `spread`, missed when some value falls short of it by
    that factor, else undecided (None): a value within the measurement's run-to-run spread of the threshold, or
    one not measured, decides nothing. `higher` False: lower values are better."""
    vals = list(values.values())
    sign = 1 if higher else -1
    if any(v is not None and sign * math.log(v / threshold) < -math.log(spread) for v in vals):
        return False
    if vals and all(v is not None and sign * math.log(v / threshold) >= math.log(spread) for v in vals):
        return True
    return None


def _range_rule(values: dict[str, Any], threshold: float, higher: bool) -> bool | None:
    """Over fold partitions: met when the mean and every partition meet `threshold`, missed when every partition
    misses it, else undecided (the partitions disagree: the threshold lies within the figure's spread). Over
    several figures: missed when one misses, met when all meet; a figure not scored (no value) decides nothing."""
    sign = 1 if higher else -1

    def meets(x: float) -> bool:
        return sign * (x - threshold) >= 0

    verdicts: list[bool | None] = []
    for v in values.values():
        mean = v.get("mean")
        if mean is None or not math.isfinite(mean):
            verdicts.append(None)
            continue
        lo, hi = v.get("min", mean), v.get("max", mean)
        worst, best = (lo, hi) if higher else (hi, lo)
        verdicts.append(True if meets(worst) and meets(mean) else False if not meets(best) else None)
    if any(x is False for x in verdicts):
        return False
    return True if verdicts and all(x is True for x in verdicts) else None


def _spans(res: dict[str, Any], m: str) -> dict[str, dict[str, Any]]:
    """Per figure of model `m`: mean, min and max over the fold partitions (min = max = mean for one)."""
    parts = res.get("partitions") or {}
    if int(parts.get("n", 1)) > 1 and m in parts.get("mean", {}):
        return {k: dict(v) for k, v in parts["mean"][m].items()}
    figs, _, _ = judged(res, m)
    return {k: {"mean": v, "min": v, "max": v} for k, v in figs.items()}


def _accuracy_rows(res: dict[str, Any], m: str, note: str, judged_: bool = True) -> list[dict[str, Any]]:
    figs, span, n = judged(res, m)
    spans = _spans(res, m)
    over = f"; mean over {n} partitions of the queries into folds, each with its own training seeds" if n > 1 else ""
    undecided = "; undecided where the partitions' range holds the threshold" if n > 1 else ""
    qs = {k: figs.get(k) for k in ("T", "Le", "Lp")}
    accs = {k: figs.get(k) for k in ("R_O", "S")}
    rule = _success_rule(res)
    other = figs.get("S_other_rule")
    against_run = f" (the same S predictions against the recorded runs' labels, rule `run`: {_f(other)})"
    return [
        {
            "target": f"median q-error on held-out real traces{note}",
            "rule": f"{m} (all training folds), out-of-fold Q50 <= {Q_TARGET} for each of T, Le, Lp{over}{undecided}",
            "measured": ", ".join(f"{k} {_f(v)}{span[k]}" for k, v in qs.items()),
            "value": qs,
            "threshold": Q_TARGET,
            "met": _range_rule({k: spans.get(k, {}) for k in qs}, Q_TARGET, higher=False),
            "judged": judged_,
        },
        {
            "target": f"backpressure and success accuracy{note}",
            "rule": f"{m}, balanced accuracy (mean per-class recall) >= {ACC_TARGET:.0%} on held-out traces"
            + (f"; S labelled by the rule `{rule}`" if rule else "")
            + over
            + undecided,
            # three decimals: a mean of 0.896 would print as 0.90 beside "missed"
            "measured": ", ".join(f"{k} {_f(v, 3)}{span[k]}" for k, v in accs.items()) + (against_run if other else ""),
            "value": accs,
            "threshold": ACC_TARGET,
            "met": _range_rule({k: spans.get(k, {}) for k in accs}, ACC_TARGET, higher=True),
            "judged": judged_,
        },
    ]


def _medians(per_type: dict[str, Any]) -> dict[str, float | None]:
    return {bt: per_type.get(bt, {}).get("median") for bt in BASE_TYPES}


def _types_text(meds: dict[str, float | None]) -> str:
    return ", ".join(f"{bt} {_f(v)}" for bt, v in meds.items())


def _exp2_rows(res: dict[str, Any]) -> list[dict[str, Any]]:
    """The placement targets of the judged Exp. 2 group (fixed before it ran: EXP2_GROUP), its flat and random
    choosers as references, then every earlier chooser under the rule it was recorded with (>= 2x per type)."""
    rows = []
    band = f"; undecided within the run-to-run Lp spread x/÷ {RUN_TO_RUN_LP} of the threshold (costmodel_repeat)"
    vs = res.get("exp2_vs_random") or {}
    for name, judged_ in ((f"{EXP2_GROUP}-gnn", True), (f"{EXP2_GROUP}-flat", False), (f"{EXP2_GROUP}-random", False)):
        role = "the chooser `adaptstream place` uses" if judged_ else "reference"
        meds = _medians(res["exp2"].get(name, {}))
        rows.append(
            {
                "target": f"placement speed-up over the initial placement (`{name}`, {role})",
                "rule": f"median over unseen queries of initial Lp / chosen Lp, both real runs, >= {SPEEDUP_TARGET}x "
                f"per type{band}",
                "measured": _types_text(meds),
                "value": meds,
                "threshold": SPEEDUP_TARGET,
                "met": _band(meds, SPEEDUP_TARGET, RUN_TO_RUN_LP),
                "judged": judged_,
            }
        )
        if name.endswith("-random"):
            continue
        meds = _medians(vs.get(name, {}))
        rows.append(
            {
                "target": f"placement faster than a random valid placement (`{name}`, {role})",
                "rule": "median over unseen queries of the random chooser's Lp / this chooser's Lp, same invocation, "
                f"> 1 per type{band}",
                "measured": _types_text(meds),
                "value": meds,
                "threshold": 1.0,
                "met": _band(meds, 1.0, RUN_TO_RUN_LP),
                "judged": judged_,
            }
        )
    for chooser, per_type in sorted(res["exp2"].items()):
        if chooser.startswith(f"{EXP2_GROUP}-"):
            continue
        meds = _medians(per_type)
        measured = [v for v in meds.values() if v is not None]
        met = None
        if measured and any(v < SPEEDUP_TARGET for v in measured):
            met = False
        elif len(measured) == len(meds) and measured:
            met = True
        rows.append(
            {
                "target": f"placement speed-up (`{chooser}`, an earlier invocation, original rule)",
                "rule": f"median over unseen queries of initial Lp / chosen Lp, both real runs, >= {SPEEDUP_TARGET}x "
                "per type",
                "measured": _types_text(meds),
                "value": meds,
                "threshold": SPEEDUP_TARGET,
                "met": met,
                "judged": False,
            }
        )
    return rows


def targets(res: dict[str, Any]) -> list[dict[str, Any]]:
    """The report's targets as data (target, rule, measured, value, threshold, met, judged), computed from the
    result: the judged ones first, then references (the fine-tuned GNN, other choosers, earlier invocations)."""
    m = main_model(res)
    rows = _accuracy_rows(res, m, "")
    if m != "sim_fine_tuned" and "sim_fine_tuned" in res["cv"]:
        rows += _accuracy_rows(res, "sim_fine_tuned", " (reference: the model judged before git 1316912)", False)
    rows += _exp2_rows(res)
    return sorted(rows, key=lambda r: not r["judged"])


def targets_markdown(rows: list[dict[str, Any]]) -> list[str]:
    """The targets table (`meta.targets_table`): judged rows first; a reference row's verdict judges nothing."""
    return targets_table(
        [(r["target"] + ("" if r["judged"] else " [reference]"), r["rule"], r["measured"], r["met"]) for r in rows],
        "undecided",
    )


def _clean(obj: Any) -> Any:
    """The object with every non-finite float as None: JSON has no NaN or infinity."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: _clean(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_clean(v) for v in obj]
    return obj


def summary_json(res: dict[str, Any]) -> dict[str, Any]:
    """The report's JSON: the targets' figures on top, every figure per model, and the whole result as detail."""
    return _clean(_summary(res))


def _summary(res: dict[str, Any]) -> dict[str, Any]:
    m = main_model(res)
    figs, _, n = judged(res, m)
    judged_chooser = f"{EXP2_GROUP}-gnn"
    exp2 = res["exp2"].get(judged_chooser, {})
    return {
        "targets": targets(res),
        "labels": "real (testbed runs, docs/testbed.md)",
        "model": m,
        "fold_partitions": n,  # the figures below are the mean over this many partitions of the queries into folds
        "qerror_median": {k: figs.get(k) for k in ("T", "Le", "Lp")},
        "accuracy_balanced": {k: figs.get(k) for k in ("R_O", "S")},
        "success_rule": _success_rule(res) or "run",
        "success_balanced_under_run_rule": figs.get("S_other_rule"),
        "by_model": {
            name: {
                "qerror_median": {k: sc[k].get("q50") for k in ("T", "Le", "Lp")},
                "accuracy_balanced": {k: sc[k].get("balanced_acc") for k in ("R_O", "S")},
            }
            for name, per in res["cv"].items()
            for sc in [per[max(per, key=float)]]
        },
        "by_model_over_partitions": (res.get("partitions") or {}).get("mean", {}),
        "placement_speedup_median": {bt: exp2.get(bt, {}).get("median") for bt in BASE_TYPES},
        # the first chooser ("gnn") was judged until the invocation of all three choosers (EXP2_GROUP); its
        # figures and every other chooser's stay below
        "placement_speedup_chooser": judged_chooser,
        "placement_speedup_median_by_chooser": {
            c: {bt: per.get(bt, {}).get("median") for bt in BASE_TYPES} for c, per in sorted(res["exp2"].items())
        },
        "placement_vs_random_median": {  # random's Lp / the chooser's, queries both ran (none before git e0c9429)
            c: {bt: per.get(bt, {}).get("median") for bt in BASE_TYPES}
            for c, per in sorted((res.get("exp2_vs_random") or {}).items())
        },
        "placement_speedup_by_host_set": {
            hs: {
                "cpu_ratio": d["cpu_ratio"],
                "bandwidth_ratio": d["bandwidth_ratio"],
                "median_all": d["median_all"],
                "median_same_queries": d["median_common"],
                "median": {bt: d["speedups"].get("gnn", {}).get(bt, {}).get("median") for bt in BASE_TYPES},
            }
            for hs, d in (res.get("exp2_hostsets") or {}).items()
        },
        "n_traces": res["n_traces"],
        "n_queries": res["n_queries"],
        "detail": res,
    }


def _old_header(command: str, meta: dict[str, Any], res: dict[str, Any]) -> str:
    """The header of a run without a complete meta (tests that pass a partial one)."""
    return (
        f"Recorded: `{command}` at git `{meta.get('git', '?')}`{dirty_note(meta)}, {meta.get('when', '?')}, "
        f"{res['seconds']:.0f} s; 1-minute load average now {res['load1_now']}."
    )


def _success_rule(res: dict[str, Any]) -> str | None:
    """The rule the success labels were judged by; None in reports from before the rule existed (rule `run`)."""
    return (res.get("success_rule") or {}).get("rule")


def _success_text(res: dict[str, Any]) -> str:
    """The success share and, under the `rerun` rule, how many labels the longer reruns changed."""
    c = res.get("success_rule") or {}
    text = f"Success {res['success_share']:.0%}"
    if c.get("rule") == "rerun":
        secs = "/".join(f"{s:g}" for s in c["rerun_seconds"]) or "-"
        text += (
            f" by the rule `rerun`: of the {c['failed_in_run']} runs that failed (no sink rows after the warm-up), "
            f"{c['rerun']} were run again for {secs} s (`testbed-corpus --rerun-failed`) and {c['succeeded_on_rerun']} "
            "succeeded then, so they count as successes (first rows late, not never; docs/testbed.md)"
        )
        if c["not_rerun"]:
            text += f"; {c['not_rerun']} failures were not rerun and keep their label"
    elif c.get("rule") == "run":
        text += " by the rule `run` (the recorded run alone)"
    return text


def _bp_text(res: dict[str, Any]) -> str:
    """The backpressure share, which rule judges R_O, and how the rules compare."""
    rule, n, share = res["config"]["bp_rule"], res["n_bp_labelled"], res["backpressure_share"]
    if share is None:
        return f"no trace has a backpressure label under the rule `{rule}`, so R_O is not scored"
    left = "; ".join(
        f"{k} traces recorded under `{r}` left out of R_O" for r, k in (res.get("bp_left_out") or {}).items()
    )
    text = f"backpressure {share:.0%} of the {n} traces judged by the rule `{rule}`" + (f" ({left})" if left else "")
    cmp = res["bp_rule_comparison"]
    if cmp["n"]:
        says = ", ".join(f"`{r}` {k}" for r, k in cmp["backpressure"].items())
        newest = next(iter(cmp["backpressure"]))
        differs = ", ".join(f"`{r}` {k}" for r, k in cmp["differs_from_newest"].items())
        text += (
            f"; on the {cmp['n']} runs every rule can judge, backpressure by {says} "
            f"(runs where an older rule differs from `{newest}`: {differs}; rules: docs/testbed.md)"
        )
    return text


def write(res: dict[str, Any], out: Path, command: str, meta: dict[str, Any]) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    doc = {"meta": meta, **summary_json(res)}
    (out / "costmodel_real.json").write_text(json.dumps(doc, indent=1, default=str) + "\n")
    _plot(res, out / "costmodel_real.png")
    lines = [
        "# Costream cost model on REAL testbed traces",
        "",
        describe(meta) if not missing(meta) else _old_header(command, meta, res),
        "",
        f"Corpus: {res['n_traces']} real traces of {res['n_queries']} generated queries "
        f"({', '.join(f'{k} {v}' for k, v in res['by_type'].items())}), each query under a random valid placement "
        "and under the heuristic initial placement, on the testbed (Spark standalone workers in cgroups and "
        "network namespaces with tbf links, hosts small/medium/large; docs/testbed.md). "
        f"{_success_text(res)}; {_bp_text(res)}; load average before the runs {load_text(res['load1'])}.",
        "",
        "## Targets",
        "",
        *targets_markdown(targets(res)),
        "",
        "## Held-out accuracy (grouped k-fold by query, out-of-fold predictions)",
        "",
        f"{res['config']['folds']} folds over the queries: a held-out trace's query (under either placement) was "
        "never in training. Q50/Q95 over successful traces; accuracy and balanced accuracy over all traces.",
        "",
        "| model | training share | T Q50 / Q95 | Le Q50 / Q95 | Lp Q50 / Q95 | R_O acc / bal. | S acc / bal. |",
        "|---|---|---|---|---|---|---|",
    ]
    for name in MODELS:
        for frac, sc in sorted(res["cv"].get(name, {}).items(), key=lambda kv: float(kv[0])):
            cells = [f"{_f(sc[k].get('q50'))} / {_f(sc[k].get('q95'))}" for k in ("T", "Le", "Lp")]
            cells += [f"{_f(sc[k].get('acc'))} / {_f(sc[k].get('balanced_acc'))}" for k in ("R_O", "S")]
            share = "-" if name == "sim_zero_shot" else f"{float(frac):.0%}"
            lines.append(f"| {name} | {share} | " + " | ".join(cells) + " |")
    lines += ["", *[f"- `{k}`: {_label(k, res)}" for k in LABELS if k in res["cv"]], *_seed_spread(res)]
    lines += ["", "![accuracy](costmodel_real.png)", ""]
    lines += _partitions(res)
    lines += _selection(res)
    lines += _by_type(res)
    lines += [
        "## Exp. 2 on the testbed: chosen placement vs initial placement, real runs",
        "",
        "Speed-up = initial Lp / chosen Lp of one query's two runs; the median is over the queries where both runs "
        "wrote rows after the warm-up. A pair where only one run did is left out of the median and counted in its "
        "own column (a speed-up without a finite latency on both sides is not computed).",
        "",
    ]
    if not res["exp2"]:
        lines.append("No Exp. 2 runs recorded (`costmodel testbed-corpus --chooser gnn`): not measured.")
    for chooser, per_type in sorted(res["exp2"].items()):
        lines += [
            f"Chooser `{chooser}` (load average {load_text((res.get('exp2_load1') or {}).get(chooser) or {})}):",
            "",
            "| query type | queries | both succeeded | only chosen / only initial succeeded | median speed-up | "
            "speed-ups |",
            "|---|---|---|---|---|---|",
        ]
        for bt, row in sorted(per_type.items()):
            sp = ", ".join(_f(r["speedup"]) for r in row["rows"])
            one = f"{row.get('n_only_chosen_ok', '-')} / {row.get('n_only_initial_ok', '-')}"
            lines.append(f"| {bt} | {row['n']} | {row['n_valid']} | {one} | {_f(row['median'])} | {sp} |")
        lines.append("")
    lines += _versus_random(res)
    lines += _heterogeneity(res)
    (out / "costmodel_real.md").write_text("\n".join(lines) + "\n")
    return out / "costmodel_real.md"


def _versus_random(res: dict[str, Any]) -> list[str]:
    """Each chooser against the random-placement chooser on the queries both ran (none before git e0c9429)."""
    vs = res.get("exp2_vs_random") or {}
    if not vs:
        return []
    lines = [
        "### Against a random valid placement",
        "",
        "On the queries that `--chooser random` also ran: random's Lp / the chooser's Lp (above 1: the chooser's "
        "placement was faster). The initial placement puts sources and their operators on the weakest hosts, so this "
        "is the comparison that says whether the model chose well.",
        "",
        "| chooser | query type | queries | both succeeded | only chooser / only random succeeded | median |",
        "|---|---|---|---|---|---|",
    ]
    for chooser, per_type in sorted(vs.items()):
        for bt, row in sorted(per_type.items()):
            one = f"{row.get('only_chooser_ok', 0)} / {row.get('only_baseline_ok', 0)}"
            lines.append(f"| {chooser} | {bt} | {row['n']} | {row['n_valid']} | {one} | {_f(row['median'])} |")
    return [*lines, ""]


def _partitions(res: dict[str, Any]) -> list[str]:
    """Largest share on every fold partition: mean (range) per model, and S of the judged model per partition."""
    parts = res.get("partitions") or {}
    if int(parts.get("n", 1)) < 2:
        return []
    n, m = int(parts["n"]), main_model(res)
    seeds = ", ".join(str(p["seed"]) for p in parts["per_partition"])
    lines = [
        f"### Over {n} fold partitions (largest training share)",
        "",
        f"The queries split into {res['config']['folds']} folds {n} ways (seeds {seeds}); every model is trained "
        "afresh per partition with that seed, the first partition is the table above. Mean (min-max) over the "
        "partitions; the targets judge these means.",
        "",
        "| model | T Q50 | Le Q50 | Lp Q50 | R_O bal. | S bal. |",
        "|---|---|---|---|---|---|",
    ]
    for name, figs in parts["mean"].items():
        cells = [f"{_f(v['mean'])} ({_f(v['min'])}-{_f(v['max'])})" for k, v in figs.items() if k != "S_other_rule"]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    per = ", ".join(_f(p["models"].get(m, {}).get("S")) for p in parts["per_partition"])
    fits = [_fit_line(p) for p in parts["per_partition"] if p.get("real_only_fit")]
    return [*lines, "", f"`{m}`'s S per partition: {per}.", "", *fits, *([""] if fits else [])]


def _fit_line(part: dict[str, Any]) -> str:
    """How the real-only success members of one partition trained: epochs, stops by the time limit (then the
    result depends on the machine's load), and the failed runs in each fold's early-stopping slice."""
    folds = [f.get("success") for f in part["real_only_fit"] if f.get("success")]
    members = [x for f in folds for x in f["members"]]
    if not members:
        return f"- seed {part['seed']}: no real-only success members recorded"
    epochs = [x["epochs"] for x in members]
    best = [x["best_epoch"] for x in members]
    timed = sum(x["time_limited"] for x in members)
    fails = ", ".join(str(f["val_by_class"]["0"]) for f in folds)
    return (
        f"- seed {part['seed']}, real-only success members: {min(epochs)}-{max(epochs)} epochs (best epoch "
        f"{min(best)}-{max(best)}), {timed} of {len(members)} stopped by the time limit; failed runs in each "
        f"fold's early-stopping slice: {fails}"
    )


def _selection(res: dict[str, Any]) -> list[str]:
    """Which GNN `selected` took per fold and metric, with the held-back scores it compared (absent before
    2026-11-27)."""
    sel = res.get("selection") or {}
    if not sel.get("per_fold"):
        return []
    lines = [
        "### Per-metric choice of `selected`",
        "",
        "Per fold, 20 % of the training queries are held back, both GNNs are fitted on the rest and scored there "
        "(median q-error; 1 - balanced accuracy; lower is better); the better one's predictions, from the model "
        "fitted on the whole training fold, stand for the fold. Ties go to the fine-tuned GNN." + _pooled_note(sel),
        "",
        "| fold | " + " | ".join(SHORTS) + " |",
        "|---|" + "---|" * len(SHORTS),
    ]
    for row in sel["per_fold"]:
        cells = []
        for k in SHORTS:
            sc = " / ".join(_f(row["scores"].get(c, {}).get(k)) for c in sel["candidates"])
            cells.append(f"{row['choice'].get(k, '-')} ({sc})")
        lines.append(f"| {row['fold'] + 1} | " + " | ".join(cells) + " |")
    final = sel.get("final_models") or {}
    lines += [
        "",
        f"Scores in brackets: {' / '.join(sel['candidates'])}. The models saved for `--chooser` took, on all "
        "traces: " + ", ".join(f"{k} {v}" for k, v in final.items()) + ".",
        "",
    ]
    return lines


def _pooled_note(sel: dict[str, Any]) -> str:
    """Why the pooled metrics' cells name `both_gnns` whatever their scores say."""
    pooled = sel.get("pooled") or []
    if not pooled:
        return ""
    return (
        f" {', '.join(pooled)}: `both_gnns` in every fold, whatever the scores (too few failed runs in a held-back "
        "slice to choose by; the scores are shown all the same)."
    )


def _by_type(res: dict[str, Any]) -> list[str]:
    """Per query type, largest training share: where a missed figure comes from (absent in older reports)."""
    per = res.get("cv_by_type") or {}
    if not per:
        return []
    lines = [
        "### Per query type (largest training share, out-of-fold)",
        "",
        "| model | query type | traces | T Q50 | Le Q50 | Lp Q50 | R_O bal. (n) | S bal. (failed) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name in MODELS:
        for qt, sc in sorted((per.get(name) or {}).items()):
            cells = [_f(sc[k].get("q50")) for k in ("T", "Le", "Lp")]
            bp, ok = sc["R_O"], sc["S"]
            cells.append(f"{_f(bp.get('balanced_acc'))} ({bp.get('n', 0)})")
            failed = ok.get("n", 0) - ok.get("positives", 0) if "positives" in ok else "-"
            cells.append(f"{_f(ok.get('balanced_acc'))} ({failed})")
            lines.append(f"| {name} | {qt} | {sc['n']} | " + " | ".join(cells) + " |")
    return [*lines, ""]


def _heterogeneity(res: dict[str, Any]) -> list[str]:
    sets = res.get("exp2_hostsets") or {}
    if len(sets) < 2:
        return []
    lines = [
        "## Speed-up and heterogeneity",
        "",
        f"The same Exp. 2 queries on other host sets (the targets above judge the corpus' set, "
        f"{res.get('corpus_hosts')}); the chooser is the one trained on the corpus. Median speed-up (queries where "
        "both runs succeeded); `same queries`: only the queries whose pair succeeded on every host set.",
        "",
        "| host set | CPU max/min | bandwidth max/min | "
        + " | ".join(BASE_TYPES)
        + " | all queries | same queries | load average |",
        "|---|---|---|" + "---|" * len(BASE_TYPES) + "---|---|---|",
    ]
    for hs, d in sorted(sets.items(), key=lambda kv: (kv[1]["cpu_ratio"], kv[1]["bandwidth_ratio"])):
        for chooser, per in sorted(d["speedups"].items()):
            cells = [f"{_f(per.get(bt, {}).get('median'))} ({per.get(bt, {}).get('n_valid', 0)})" for bt in BASE_TYPES]
            lines.append(
                f"| {hs} ({chooser}) | {d['cpu_ratio']:g} | {d['bandwidth_ratio']:g} | "
                + " | ".join(cells)
                + f" | {_f(d['median_all'])} ({d['n_valid']}) | {_f(d['median_common'])} ({d['n_common']})"
                + f" | {load_text(d['load1'])} |"
            )
    return [*lines, ""]


def _plot(res: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4))
    metrics = ("T", "Le", "Lp")
    names = [n for n in MODELS if n in res["cv"]]
    w = 0.8 / max(1, len(names))
    for k, name in enumerate(names):
        sc = res["cv"][name][max(res["cv"][name], key=float)]
        vals = [sc[m].get("q50") or math.nan for m in metrics]
        ax1.bar([i + k * w for i in range(len(metrics))], vals, w, label=name)
    ax1.axhline(Q_TARGET, color="k", ls="--", lw=1, label=f"target {Q_TARGET}")
    ax1.set_xticks([i + w * (len(names) - 1) / 2 for i in range(len(metrics))], metrics)
    ax1.set_ylabel("median q-error, held-out real traces")
    ax1.legend(fontsize=7)
    for name in ("sim_fine_tuned", "real_only", "flat_real"):
        if name not in res["cv"]:
            continue
        fr = sorted(res["cv"][name], key=float)
        for m, ls in zip(metrics, ("-", "--", ":"), strict=True):
            ax2.plot(
                [float(f) for f in fr],
                [res["cv"][name][f][m].get("q50") or math.nan for f in fr],
                ls,
                marker="o",
                label=f"{name} {m}",
            )
    ax2.set_xlabel("share of the training queries used")
    ax2.set_ylabel("median q-error")
    ax2.legend(fontsize=6)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
