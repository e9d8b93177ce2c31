"""Reading a trace corpus: its traces, and the train / val / test splits by trace hash (what `costmodel train`
needs). Building a SIMULATED corpus is the benchmark harness's (adaptstream_bench.costmodel.simcorpus).

Layout of a corpus directory::

    manifest.json                 seeds, sizes, per-partition counts, class balance, timings, simulator config
    traces/part-00000.jsonl       one Trace per line
    ...
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from adaptstream.costmodel.model import Trace, read_traces
from adaptstream.errors import CostModelError

MANIFEST = "manifest.json"
SPLITS = (("train", 0.8), ("val", 0.1), ("test", 0.1))


def iter_corpus(corpus_dir: str | Path) -> Iterator[Trace]:
    """All traces of a corpus directory in partition order."""
    files = sorted((Path(corpus_dir) / "traces").glob("part-*.jsonl"))
    if not files:
        msg = f"no trace partitions under {corpus_dir}/traces"
        raise CostModelError(msg)
    for f in files:
        yield from read_traces(f)


# --- splits ----------------------------------------------------------------------------------------------
def split_of(trace_id: str, fractions: Sequence[tuple[str, float]] = SPLITS) -> str:
    """Deterministic split by a hash of the trace id (80/10/10 by default, as in Costream Sec. VII)."""
    h = int.from_bytes(hashlib.sha1(trace_id.encode()).digest()[:8], "big") / 2**64
    acc = 0.0
    for name, frac in fractions:
        acc += frac
        if h < acc:
            return name
    return fractions[-1][0]


def hardware_outside(trace: Trace, **ranges: tuple[float, float]) -> bool:
    """True when any host has a feature outside its [lo, hi] range, e.g. hardware_outside(t, cpu=(100, 800)):
    the extrapolation hold-out of Costream Exp. 4 (train inside the range, test on traces outside it)."""
    for h in trace.hosts:
        for name, (lo, hi) in ranges.items():
            v = getattr(h, name)
            if v < lo or v > hi:
                return True
    return False


def filters_longer_than(trace: Trace, n: int) -> bool:
    """True for linear filter chains with more than n filters (Costream Exp. 5: unseen query patterns)."""
    return trace.query.query_type.startswith("linear") and trace.query.n_filters > n


def extrapolation_split(traces: Sequence[Trace], holdout: Callable[[Trace], bool]) -> tuple[list[Trace], list[Trace]]:
    """(inside, held_out) by a predicate such as hardware_outside or filters_longer_than."""
    inside: list[Trace] = []
    held: list[Trace] = []
    for t in traces:
        (held if holdout(t) else inside).append(t)
    return inside, held


# ----------------------------------------------------------------------------------------------------
# loading a corpus for training and evaluation


def _split_files(corpus: Path, split: str) -> list[Path]:
    candidates = [corpus / f"{split}.jsonl", corpus / "splits" / f"{split}.jsonl"]
    found = [p for p in candidates if p.exists()]
    for d in (corpus / split, corpus / "splits" / split):
        if d.is_dir():
            found += sorted(d.rglob("*.jsonl")) + sorted(d.rglob("part-*"))
    return [p for p in found if p.is_file() and not p.name.startswith(".")]


def load_traces(paths: Sequence[Path]) -> list[Any]:
    from adaptstream.costmodel.model import Trace

    out: list[Any] = []
    for p in paths:
        with p.open(encoding="utf-8") as fh:
            out.extend(Trace.from_json(line) for line in fh if line.strip())
    return out


def load_corpus(corpus_dir: str | Path) -> dict[str, list[Any]]:
    """train/val/test traces: explicit split files if present, else the data side's layout
    (``traces/part-*.jsonl``) split by ``corpus.split_of`` (a hash of the trace id, 80/10/10)."""
    corpus = Path(corpus_dir)
    explicit = {s: _split_files(corpus, s) for s in ("train", "val", "test")}
    if all(explicit.values()):
        return {s: load_traces(files) for s, files in explicit.items()}
    if (corpus / "traces").is_dir():
        out: dict[str, list[Any]] = {"train": [], "val": [], "test": []}
        for t in iter_corpus(corpus):
            out[split_of(t.trace_id)].append(t)
        return out
    msg = (
        f"no corpus under {corpus}: expected traces/part-*.jsonl (scripts/costmodel_build_corpus.py) "
        "or train/val/test .jsonl files"
    )
    raise CostModelError(msg)
