"""Where benchmark reports go: a fresh run directory by default, the committed docs/results only on request.

Benchmarks used to rewrite tracked files under docs/results/ on every invocation; a user trying one out should not
find their checkout modified. ``--update-docs`` (or an explicit ``--out``) is how a maintainer regenerates them.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from adaptstream.errors import ConfigError

DOCS_RESULTS = Path("docs/results")


def report_dir(
    name: str,
    out: str | os.PathLike[str] | None,
    update_docs: bool,
    docs_dir: str | os.PathLike[str] = DOCS_RESULTS,
    report: str | None = None,
) -> Path:
    """``--out`` if given, else ``docs_dir`` with ``--update-docs``, else ``runs/<name>-<timestamp>/``.

    ``report``: the JSON a new run writes there. An ``--out`` that already holds it is refused, so a second run
    never overwrites (or, worse, mixes into) the first one's report; ``--update-docs`` replaces the committed report
    on purpose, and ``--report-only`` callers pass no ``report``."""
    if out is not None and update_docs:
        msg = "pass either --out DIR or --update-docs, not both"
        raise ConfigError(msg)
    if out is not None:
        if report is not None and (Path(out) / report).exists():
            msg = (
                f"--out {out} already holds a report ({report}): give a new folder (the default "
                "runs/<name>-<time> is always new), or rebuild that report with --report-only"
            )
            raise ConfigError(msg)
        return Path(out)
    if update_docs:
        return Path(docs_dir)
    return Path("runs") / f"{name}-{time.strftime('%Y%m%d-%H%M%S')}"
