"""What every benchmark report records about its own run: command, git revision, machine, load before/after.

A report is regenerated from its JSON, so these facts travel in the JSON, never in text written at render time.
Every report JSON's ``meta`` holds at least :data:`REQUIRED` (written by :func:`start_meta` when the run starts
and by :func:`finish_meta`, or ``meta.update(load_after=..., finished=...)``, when it ends); the test over
docs/results checks it with :func:`missing`.
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]  # the repository: benchmarks/adaptstream_bench/<file>


def load_range(items: Iterable[Any]) -> dict[str, float]:
    """Min / median / max of the 1-minute load average recorded before each item's run (``meta["load1_before"]``,
    as real cost-model traces keep it); {} when none recorded it."""
    xs = [float(t.meta["load1_before"]) for t in items if "load1_before" in t.meta]
    return {"min": min(xs), "median": statistics.median(xs), "max": max(xs)} if xs else {}


def load_text(d: dict[str, float]) -> str:
    """A :func:`load_range` as report text."""
    return f"{d['min']:.1f}-{d['max']:.1f} (median {d['median']:.1f})" if d else "not recorded"


def git_revision() -> str:
    """Short revision of the checkout the code runs from ("unknown" outside a git checkout; a copy of the tree
    run elsewhere, e.g. on a GPU machine, passes it in ``ADAPTSTREAM_GIT_REV``)."""
    if os.environ.get("ADAPTSTREAM_GIT_REV"):
        return os.environ["ADAPTSTREAM_GIT_REV"]
    try:
        out = subprocess.run(
            ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True
        )
        return out.stdout.strip() or "unknown"
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


#: what benchmarks write (reports, and the files --update-docs replaces): changes there do not change the code a run
#: ran, so a queue of benchmarks from one clean commit stays clean after the first one rewrote its report
OUTPUTS = "docs/results"


def git_dirty() -> bool | None:
    """Whether tracked files outside :data:`OUTPUTS` differ from the revision (None: not a git checkout). A copy of
    the tree run elsewhere passes it in ``ADAPTSTREAM_GIT_DIRTY`` (1 or 0)."""
    if os.environ.get("ADAPTSTREAM_GIT_DIRTY") in ("0", "1"):
        return os.environ["ADAPTSTREAM_GIT_DIRTY"] == "1"
    try:
        out = subprocess.run(
            [
                "git",
                "-C",
                str(ROOT),
                "status",
                "--porcelain",
                "--untracked-files=no",
                "--",
                ".",
                f":(exclude){OUTPUTS}",
            ],
            capture_output=True,
            text=True,
            check=True,
        )
    except (OSError, subprocess.CalledProcessError):
        return None
    return bool(out.stdout.strip())


#: what every report's ``meta`` holds; ``machine`` has at least ``host`` and ``cpus`` (its core count)
REQUIRED = ("command", "argv", "git", "dirty", "started", "finished", "load_before", "load_after", "machine")


def missing(meta: Any) -> list[str]:
    """The :data:`REQUIRED` fields a report's meta lacks or holds in the wrong shape ([] when complete)."""
    if not isinstance(meta, dict):
        return ["meta"]
    gone = [k for k in REQUIRED if k not in meta]
    machine = meta.get("machine")
    if not isinstance(machine, dict) or not {"host", "cpus"} <= machine.keys():
        gone.append("machine.host/cpus")
    for k in ("started", "finished"):
        if k in meta and not isinstance(meta[k], int | float):
            gone.append(f"{k} (seconds since the epoch)")
    for k in ("load_before", "load_after"):
        if k in meta and not (isinstance(meta[k], list | tuple) and len(meta[k]) == 3):
            gone.append(f"{k} (the three load averages)")
    if "dirty" in meta and not isinstance(meta["dirty"], bool):
        gone.append("dirty (true/false)")
    return gone


def dirty_note(meta: dict[str, Any]) -> str:
    """Words a report header adds when the run was made from a tree with uncommitted changes."""
    if meta.get("dirty"):
        return f" (run from a tree with uncommitted changes to git {meta.get('git')}: not reproducible from it alone)"
    return ""


def command_line(*words: str) -> str:
    """The invocation as a user would type it: the given command words plus this process's options."""
    argv = sys.argv[1:]
    opts = argv[next((i for i, a in enumerate(argv) if a.startswith("-")), len(argv)) :]
    return " ".join(["adaptstream", *words, *opts])


def start_meta(*words: str, **config: Any) -> dict[str, Any]:
    """The run's identity, taken when it starts: merge it into the report's meta (``{**start_meta(...), ...}``)."""
    return {
        "command": command_line(*words),
        "argv": list(sys.argv),
        "git": git_revision(),
        "dirty": git_dirty(),
        "machine": {"host": platform.node(), "cpus": os.cpu_count(), "python": platform.python_version()},
        "load_before": list(os.getloadavg()),
        "started": time.time(),
        "loads": [],
        **config,
    }


def script_meta(**config: Any) -> dict[str, Any]:
    """:func:`start_meta` for a script run as ``python benchmarks/NAME.py ...`` (its command as typed)."""
    return {**start_meta(**config), "command": " ".join(["python", *sys.argv])}


def sample_load(meta: dict[str, Any]) -> None:
    """Record the 1-minute load average now (called between measurements)."""
    meta["loads"].append(os.getloadavg()[0])


def finish_meta(meta: dict[str, Any]) -> dict[str, Any]:
    loads = meta["loads"] or [os.getloadavg()[0]]
    meta.update(
        load_after=list(os.getloadavg()),
        finished=time.time(),
        load_mean=sum(loads) / len(loads),
        load_max=max(loads),
    )
    return meta


def describe_run(meta: dict[str, Any]) -> str:
    """ "Command: ... (git ..., when). Machine: ...." for a meta of :func:`start_meta`, or of a report recorded
    before it (a start time as text, the machine as one string)."""
    started = meta.get("started")
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(started)) if isinstance(started, int | float) else started
    m = meta.get("machine")
    machine = f"{m.get('host')}, {m.get('cpus')} cores" if isinstance(m, dict) else str(m)
    return f"Command: `{meta.get('command')}` (git {meta.get('git')}{dirty_note(meta)}, {when}). Machine: {machine}."


def describe(meta: dict[str, Any]) -> str:
    """One Markdown paragraph naming the run a report comes from."""
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(meta["started"]))
    m = meta["machine"]
    text = (
        f"Command: `{meta['command']}` (git {meta['git']}{dirty_note(meta)}, {when}). Machine: {m['host']}, "
        f"{m['cpus']} cores, "
        f"Python {m['python']}"
    )
    if "master" in meta:
        text += f", Spark master {meta['master']}"
    text += f". 1-minute load average {meta['load_before'][0]:.2f} before"
    if "load_after" in meta:
        text += (
            f", {meta['load_after'][0]:.2f} after, mean {meta['load_mean']:.2f} / max {meta['load_max']:.2f} "
            f"between measurements; wall time {(meta['finished'] - meta['started']) / 60:.1f} min"
        )
    else:
        text += " (the run did not finish: partial results)"
    return text + ".\n"


def report_head(title: str, meta: dict[str, Any]) -> list[str]:
    """A report's first lines: its title, the run it comes from (:func:`describe`) and its set-up (``sizing``)."""
    return [f"# {title}", "", describe(meta), "", f"Set-up: {meta['sizing']}", ""]


def targets_table(targets: list[tuple[str, str, str, bool | None]], unknown: str = "n/a") -> list[str]:
    """The Markdown table of a report's targets: (target, rule, measured, met), met None = ``unknown``."""
    lines = ["| target | rule | measured | verdict |", "|---|---|---|---|"]
    for name, rule, measured, met in targets:
        verdict = unknown if met is None else ("met" if met else "missed")
        lines.append(f"| {name} | {rule} | {measured} | **{verdict}** |")
    return lines


def verdict_table(targets: list[dict[str, Any]]) -> list[str]:
    """:func:`targets_table` of a report's ``targets`` (dicts with target, rule, measured, met)."""
    return targets_table([(t["target"], t["rule"], t["measured"], t["met"]) for t in targets], "undecided")


def write_report_files(
    data: dict[str, Any],
    target: Path,
    name: str,
    targets: Callable[[dict[str, Any]], list[dict[str, Any]]],
    markdown: Callable[[dict[str, Any]], str],
    plot: Callable[[dict[str, Any], Path], None],
) -> Path:
    """A report's three files from its data: ``<name>.json`` with the targets computed now, the PNG and the
    Markdown, both drawn from that JSON's content alone. Returns the Markdown's path."""
    target.mkdir(parents=True, exist_ok=True)
    data = {**data, "targets": targets(data)}
    (target / f"{name}.json").write_text(json.dumps(data, indent=1, default=float) + "\n")
    plot(data, target / f"{name}.png")
    md = target / f"{name}.md"
    md.write_text(markdown(data))
    return md


def rerender(name: str, write_report: Callable[[dict[str, Any], Path], Path]) -> None:
    """``python -m adaptstream_bench.<x>_report DIR``: rebuild a report's files from ``DIR/<name>.json``."""
    d = Path(sys.argv[1])
    print(write_report(json.loads((d / f"{name}.json").read_text()), d))
