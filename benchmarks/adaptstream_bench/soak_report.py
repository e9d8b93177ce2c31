"""Report of ``adaptstream bench soak``: the samples, and per role and measure one target with its verdict computed
here.

Targets, fixed before any run was recorded (issue #57: "soak: RSS, descriptors and threads within 10 % of their
value after warm-up"):

* per role (driver, jvm, source, workers) and measure (RSS, open descriptors, threads): the median of the samples
  in the last minute of input is at most 1.10x the median of the samples in the minute after the warm-up. Met or
  missed by that rule; undecided when either minute has no sample of the role, or the run did not end with exit
  status 0.
"""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

from adaptstream_bench.meta import describe, rerender, verdict_table, write_report_files

NAME = "soak"
ROLES = ("driver", "jvm", "source", "workers")
MEASURES = (("rss_mb", "RSS (MB)"), ("fds", "open descriptors"), ("threads", "threads"))
GROWTH = 1.10


def windows(data: dict) -> tuple[list[dict], list[dict]]:
    """The reference minute (after the warm-up) and the last minute of input."""
    m, ss = data["meta"], data["samples"]
    w0 = 60 * float(m["warmup_minutes"])
    end = 60 * float(m["minutes"])
    ref = [s for s in ss if w0 <= s["t"] < w0 + 60]
    last = [s for s in ss if end - 60 <= s["t"] < end]
    return ref, last


def _median(samples: list[dict], role: str, key: str) -> float | None:
    xs = [s[role][key] for s in samples if s[role]["procs"] > 0]
    return statistics.median(xs) if xs else None


def targets(data: dict) -> list[dict[str, Any]]:
    ref, last = windows(data)
    ok_exit = data["meta"].get("exit_status") == 0
    out = []
    for role in ROLES:
        for key, label in MEASURES:
            a, b = _median(ref, role, key), _median(last, role, key)
            if a is None or b is None:
                met, measured = None, "no sample of this role in one of the two minutes"
            else:
                ratio = b / a if a > 0 else (1.0 if b == 0 else float("inf"))
                met = ratio <= GROWTH if ok_exit else None
                measured = f"{a:g} after warm-up, {b:g} at the end ({ratio:.2f}x)"
                if not ok_exit:
                    measured += f"; the run's exit status was {data['meta'].get('exit_status')}"
            out.append({"target": f"{role} {label} grows by at most {GROWTH - 1:.0%}",
                        "rule": "median of the last minute / median of the minute after warm-up",
                        "measured": measured, "met": met})  # fmt: skip
    return out


def markdown(data: dict) -> str:
    m = data["meta"]
    lines = [
        "# Soak: one query at a steady rate, what its processes hold over time (issue #57 item 6, the soak part)",
        "",
        describe(m),
        "",
        f"Set-up: {m['sizing']}",
        "",
        f"What is sampled: {m.get('sampled', 'not recorded')}",
        "",
        *(
            []
            if m.get("processes_by") == "session"
            else [
                "Correction (added after the run): this run's sampler walked the driver's process group, which "
                "PySpark's `pyspark.daemon` leaves as it starts (`setpgid`): Python workers could not be seen, "
                "whether they ran or not; that is why the workers' targets are undecided. Later runs walk the "
                "driver's session.",
                "",
            ]
        ),
        "Rule: " + (__doc__ or "").split("):", 1)[1].strip(),
        "",
        "## Targets",
        "",
        *verdict_table(data["targets"]),
        "",
        f"Samples: {len(data['samples'])}; the run's exit status: {m.get('exit_status', 'still running')}.",
        "",
        f"![RSS, descriptors and threads over time]({NAME}.png)",
        "",
    ]
    return "\n".join(lines)


def draw(ax, samples: list[dict], key: str) -> None:
    """One measure of every role over the run's minutes."""
    ts = [s["t"] / 60 for s in samples]
    for role in ROLES:
        ax.plot(ts, [s[role][key] for s in samples], label=role)
    ax.set_xlabel("minutes")


def _plot(data: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(12, 3.5))
    for ax, (key, label) in zip(axes, MEASURES, strict=True):
        draw(ax, data["samples"], key)
        ax.set_title(label)
    axes[0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def write_report(data: dict, target: Path) -> Path:
    return write_report_files(data, target, NAME, targets, markdown, _plot)


if __name__ == "__main__":  # pragma: no cover
    rerender(NAME, write_report)
