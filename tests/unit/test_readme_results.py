"""README's Results section quotes only what the recorded reports hold (#55): every ratio (``1.57x``) and share
(``49 %``) in a bullet must occur in a JSON report the bullet links to (a number there, or one inside a string such
as a target's ``measured``), to the decimals quoted; a percentage may be the JSON's fraction x 100. Figures that are
a computation over several recorded numbers are listed in :data:`DERIVED` with that computation, checked too;
figures whose report JSON does not hold them are in :data:`NOT_IN_JSON` with the reason, and that list may only
shrink."""

from __future__ import annotations

import json
import re
import statistics
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
FIGURE = re.compile(r"(?<![\w.])(\d+(?:\.\d+)?)(?:\s*-\s*(\d+(?:\.\d+)?))?\s?(x|%)(?!\w)")
LINK = re.compile(r"\((docs/results/[\w./-]+?\.md)\)")
NUMBER = re.compile(r"(?:(?<![\w.)])-)?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?")  # "0.48x-0.60x": a range, not -0.60


def _capacity_cpu_ratio(workload: str, rate: int) -> Callable[[dict], float]:
    def ratio(doc: dict) -> float:
        cpu = {
            p: statistics.median(
                r["cpu_us_per_row"]
                for r in doc["runs"]
                if r["workload"] == workload and r["rate"] == rate and r["policy"] == p
            )
            for p in ("lmstream", "asap")
        }
        return cpu["lmstream"] / cpu["asap"]

    return ratio  # fmt: skip


def _load_thput_ratio(workload: str, rate: int) -> Callable[[dict], float]:
    """lmstream's Eq. 4 throughput over asap's at one rate of `bench lmstream-load` (constant traffic)."""

    def ratio(doc: dict) -> float:
        runs = {
            r["policy"]: r
            for r in doc["runs"]
            if (r["traffic"], r["workload"], r["rate"]) == ("constant", workload, rate)
        }
        return runs["lmstream"]["thput"] / runs["asap"]["thput"]

    return ratio


#: (report JSON, figure as quoted) -> how the figure follows from that JSON
DERIVED: dict[tuple[str, str], Callable[[dict], float]] = {
    ("lmstream_capacity.json", "0.79x"): _capacity_cpu_ratio("LR1S", 4000),
    ("lmstream_load.json", "3.95x"): _load_thput_ratio("LR2S", 64000),
    ("lmstream_load.json", "3.90x"): _load_thput_ratio("CM1S", 64000),
    ("lmstream_load.json", "3.19x"): _load_thput_ratio("CM2S", 64000),
    ("lmstream_load.json", "1.03x"): _load_thput_ratio("CM1T", 64000),
}

#: (report JSON, figure as quoted) -> why its JSON does not hold it (to be emptied by re-recording the report)
NOT_IN_JSON: dict[tuple[str, str], str] = {}


def _bullets() -> list[str]:
    text = (ROOT / "README.md").read_text()
    section = text[text.index("\n## Results\n") :]
    section = section[: section.index("\n## ", 5)]
    return re.split(r"\n- ", section)[1:]


def _reports(bullet: str) -> list[Path]:
    """The JSON of every report the bullet links to (a folder's README.md: the folder's summary.json)."""
    out = []
    for link in LINK.findall(bullet):
        md = ROOT / link
        for candidate in (md.with_suffix(".json"), md.parent / "summary.json"):
            if candidate.exists():
                out.append(candidate)
                break
    return list(dict.fromkeys(out))


def _numbers(x: Any) -> Iterator[float]:
    if isinstance(x, dict):
        for v in x.values():
            yield from _numbers(v)
    elif isinstance(x, list):
        for v in x:
            yield from _numbers(v)
    elif isinstance(x, bool) or x is None:
        return
    elif isinstance(x, int | float):
        yield float(x)
    elif isinstance(x, str):
        yield from (float(m) for m in NUMBER.findall(x))


def _quoted(bullet: str) -> Iterator[tuple[str, float, int, str]]:
    """(figure as quoted, value, decimals, unit) for every ratio and share in the bullet."""
    for m in FIGURE.finditer(bullet):
        for g in (m.group(1), m.group(2)):
            if g is not None:
                yield g + m.group(3), float(g), len(g.split(".")[1]) if "." in g else 0, m.group(3)


def _close(value: float, quoted: float, decimals: int) -> bool:
    return abs(value - quoted) <= 0.5 * 10**-decimals + 1e-9


@pytest.mark.parametrize("bullet", _bullets(), ids=lambda b: b[:40])
def test_every_figure_quoted_in_the_results_section_occurs_in_a_report_it_links(bullet):
    reports = _reports(bullet)
    docs = {str(p.relative_to(ROOT / "docs" / "results")): json.loads(p.read_text()) for p in reports}
    numbers = [v for d in docs.values() for v in _numbers(d)]
    missing = []
    for text, q, decimals, unit in _quoted(bullet):
        if any(_close(v, q, decimals) or (unit == "%" and _close(100 * v, q, decimals)) for v in numbers):
            continue
        derived = [f(docs[name]) for (name, fig), f in DERIVED.items() if fig == text and name in docs]
        if any(_close(v, q, decimals) for v in derived):
            continue
        if any(fig == text and name in docs for name, fig in NOT_IN_JSON):
            continue
        missing.append(text)
    assert not missing, f"quoted in README but not in {sorted(docs) or 'any linked report JSON'}: {missing}"


def test_the_lists_of_exceptions_name_figures_that_are_still_quoted():
    quoted = {(p.name, text) for b in _bullets() for p in _reports(b) for text, *_ in _quoted(b)}
    stale = [k for k in [*DERIVED, *NOT_IN_JSON] if k not in quoted]
    assert not stale, f"no longer quoted in README: remove {stale}"


COUNTED = re.compile(r"(?<![\d.])(\d+) of (\d+) (met|missed|undecided)\b|(?<![\d.])(\d+) (met|missed|undecided)\b")
WORD = re.compile(r"\b(met|missed|undecided)\b")


def _targets(x: Any) -> Iterator[dict]:
    """Every target a report JSON records (a dict with a ``met`` verdict inside a ``targets`` list)."""
    if isinstance(x, dict):
        for k, v in x.items():
            if k == "targets" and isinstance(v, list):
                yield from (t for t in v if isinstance(t, dict) and "met" in t)
            else:
                yield from _targets(v)
    elif isinstance(x, list):
        for v in x:
            yield from _targets(v)


def _verdict(t: dict) -> str:
    return "undecided" if t["met"] is None else ("met" if t["met"] else "missed")


#: report JSON -> why the verdicts README quotes from it are not in it (to be emptied by re-recording the report)
VERDICTS_NOT_IN_JSON: dict[str, str] = {}


def _segments(bullet: str) -> Iterator[tuple[str, str, list[str]]]:
    """(report JSON name, text, its verdicts) for each stretch from a link to a report with a JSON to the next such
    link (links to folders without one, such as an archive index, do not start a stretch)."""
    found = []
    for m in LINK.finditer(bullet):
        md = ROOT / m.group(1)
        js = [c for c in (md.with_suffix(".json"), md.parent / "summary.json") if c.exists()]
        if js:
            found.append((m, js[0]))
    for i, (m, js) in enumerate(found):
        end = found[i + 1][0].start() if i + 1 < len(found) else len(bullet)
        yield js.name, bullet[m.end() : end], [_verdict(t) for t in _targets(json.loads(js.read_text()))]


@pytest.mark.parametrize("bullet", _bullets(), ids=lambda b: b[:40])
def test_every_verdict_word_in_the_results_section_is_one_the_linked_report_computed(bullet):
    """A count of verdicts ("17 of 18 met", "5 undecided") equals the count in the report JSON the stretch of text
    follows a link to; a bare "met", "missed" or "undecided" needs at least one such verdict there."""
    wrong = []
    for name, text, verdicts in _segments(bullet):
        if name in VERDICTS_NOT_IN_JSON:
            continue
        counted_spans = []
        for m in COUNTED.finditer(text):
            counted_spans.append(m.span())
            if m.group(1):
                k, n, word = int(m.group(1)), int(m.group(2)), m.group(3)
                if verdicts.count(word) != k or len(verdicts) != n:
                    wrong.append(f"{m.group(0)!r} (report: {verdicts.count(word)} of {len(verdicts)} {word})")
            elif verdicts.count(m.group(5)) != int(m.group(4)):
                wrong.append(f"{m.group(0)!r} (report: {verdicts.count(m.group(5))} {m.group(5)})")
        for m in WORD.finditer(text):
            if any(a <= m.start() < b for a, b in counted_spans):
                continue
            if m.group(1) not in verdicts:
                wrong.append(f"{m.group(0)!r} near {text[max(0, m.start() - 60) : m.end()]!r} (report: {verdicts})")
    assert not wrong, f"verdicts in README that the linked report does not hold: {wrong}"


def test_reports_excused_from_the_verdict_check_still_lack_targets():
    for name in VERDICTS_NOT_IN_JSON:
        doc = json.loads((ROOT / "docs" / "results" / name).read_text())
        assert not list(_targets(doc)), f"{name} now records targets: remove it from VERDICTS_NOT_IN_JSON"
