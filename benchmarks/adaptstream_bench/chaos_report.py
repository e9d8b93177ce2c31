"""Report of ``adaptstream bench chaos``: every trial, and per kind one target with its verdict computed here.

Targets, fixed before any run was recorded (issue #57: "0 rows lost and 0 duplicated over every chaos trial"):

* per kind: every trial's restart drains the input (exit status 0) and its output equals batch SQL over the same
  input, with 0 rows (windows) lost, 0 duplicated and 0 with other values. Missed when any trial of the kind breaks
  this; met when none does and at least one trial of the kind was really killed (its kill came before the driver
  finished) and no trial of the kind was skipped by the budget; undecided otherwise.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from adaptstream_bench.meta import describe, rerender, verdict_table, write_report_files

NAME = "chaos"


def _kinds(data: dict) -> list[str]:
    return list(dict.fromkeys(t["kind"] for t in data["trials"]))


def _bad(t: dict) -> bool:
    return t["restart_rc"] != 0 or t["lost"] > 0 or t["duplicated"] > 0 or t["wrong"] > 0


def targets(data: dict) -> list[dict[str, Any]]:
    out = []
    kinds = list(dict.fromkeys(t["kind"] for t in data["trials"]))
    for kind in kinds:
        ts = [t for t in data["trials"] if t["kind"] == kind]
        killed = [t for t in ts if not t["killed"].startswith("not killed")]
        skipped = [s for s in data.get("skipped", []) if s.startswith(kind + " ")]
        bad = [t for t in ts if _bad(t)]
        met = False if bad else (None if not killed or skipped else True)
        unit = ts[0]["unit"]
        out.append(
            {
                "target": f"{kind}: 0 {unit} lost, 0 duplicated, 0 wrong, every restart drains",
                "rule": "per trial: output == batch SQL over the input after the restart; missed on any breach",
                "measured": f"{len(ts)} trials ({len(killed)} killed), {sum(t['lost'] for t in ts)} lost, "
                f"{sum(t['duplicated'] for t in ts)} duplicated, {sum(t['wrong'] for t in ts)} wrong, "
                f"{sum(t['restart_rc'] != 0 for t in ts)} restarts failed"
                + (f"; {len(skipped)} skipped by the budget" if skipped else ""),
                "met": met,
            }
        )
    return out


def kinds_text() -> str:
    """What each kind kills, from the benchmark's own docstring."""
    from adaptstream_bench import chaos

    return (chaos.__doc__ or "").split("after the driver started (so start-up, reading, writing and committing are all "
                                       "hit):", 1)[-1].split("Then the same driver", 1)[0].strip()  # fmt: skip


OLD_COMMITS = "files in commits/ before restart (a batch's commit and its .crc)"


def committed(t: dict) -> int:
    """Batches committed before the restart; runs recorded at git a403ebf and before counted the files of the
    checkpoint's commits/ folder instead (each batch's commit and its hidden .crc), see :data:`OLD_COMMITS`."""
    return int(t.get("batches_committed_before_restart", t.get("commits_before_restart", 0)))


def committed_label(trials: list[dict]) -> str:
    old = any("batches_committed_before_restart" not in t for t in trials)
    return OLD_COMMITS if old else "batches committed before restart"


def trial_lines(data: dict) -> list[str]:
    """The trials table, failed restarts, first runs that failed on their own and trials the budget skipped."""
    lines = [
        f"| kind | trial | kill at s | killed | first exit | {committed_label(data['trials'])} | restart exit | "
        "restart s | expected | got | lost | duplicated | wrong |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for t in data["trials"]:
        lines.append(
            f"| {t['kind']} | {t['trial'] + 1} | {t['kill_at_s']:.1f} | {t['killed']} | {t['first_rc']} | "
            f"{committed(t)} | {t['restart_rc']} | {t['restart_s']:.0f} | {t['expected']} "
            f"{t['unit']} | {t['got']} | {t['lost']} | {t['duplicated']} | {t['wrong']} |"
        )
    errors = [t for t in data["trials"] if t["restart_rc"] != 0]
    if errors:
        lines += ["", "Failed restarts (last lines of stderr):", ""]
        lines += [f"- {t['kind']} trial {t['trial'] + 1}: `{t['restart_error'][-300:]}`" for t in errors]
    own = [t for t in data["trials"] if t.get("first_error")]
    if own:
        lines += ["", "First runs that failed on their own after the kill (the restart then drained):", ""]
        lines += [f"- {t['kind']} trial {t['trial'] + 1} (exit {t['first_rc']}): `{t['first_error']}`" for t in own]
    if data.get("skipped"):
        lines += ["", f"Not run (budget): {', '.join(data['skipped'])}."]
    return lines


def markdown(data: dict) -> str:
    m = data["meta"]
    lines = [
        "# Chaos: kill -9 at random moments, then restart (issue #57 item 6, the chaos part)",
        "",
        describe(m),
        "",
        f"Set-up: {m['sizing']}",
        "",
        "What each kind kills, and the rule: " + (__doc__ or "").split("Targets, fixed", 1)[0].split("\n", 1)[1],
        "Rule: " + (__doc__ or "").split("):", 1)[1].strip(),
        "",
        "## Targets",
        "",
        *verdict_table(data["targets"]),
        "",
        "## Trials",
        "",
        *trial_lines(data),
    ]
    absent = [f"the kind {k}" for k in m.get("kinds_available", []) if k not in _kinds(data)]
    lines += [
        "",
        "Not in this run: "
        + ", ".join([*absent, "the 10x backlog on every connector and the long steady run (issue #57 item 6)"])
        + "; `adaptstream bench reliability` runs all three in one invocation.",
        "",
        f"![kill moments]({NAME}.png)",
        "",
    ]
    return "\n".join(lines)


def draw(ax, data: dict) -> None:
    """Kill moment against batches committed before the restart, per kind; breaches in red."""
    for i, kind in enumerate(dict.fromkeys(t["kind"] for t in data["trials"])):
        ts = [t for t in data["trials"] if t["kind"] == kind]
        ok = [t for t in ts if not _bad(t)]
        bad = [t for t in ts if _bad(t)]
        ax.scatter([t["kill_at_s"] for t in ok], [committed(t) for t in ok], label=f"{kind}",
                   marker="os^"[i % 3], color=f"C{i}")  # fmt: skip
        if bad:
            ax.scatter([t["kill_at_s"] for t in bad], [committed(t) for t in bad], marker="x",
                       color="red", label=f"{kind}: lost/duplicated/failed")  # fmt: skip
    ax.set_xlabel("kill moment (s after the driver started)")
    ax.set_ylabel(committed_label(data["trials"]).split(" (")[0])
    ax.legend(fontsize=8)


def _plot(data: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 3.5))
    draw(ax, data)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write_report(data: dict, target: Path) -> Path:
    return write_report_files(data, target, NAME, targets, markdown, _plot)


if __name__ == "__main__":  # pragma: no cover
    rerender(NAME, write_report)
