"""Where the real-data workloads find the CppStream samples: configuration first, then the copy in the package."""

from __future__ import annotations

import os
from pathlib import Path

from adaptstream.errors import WorkloadError

ENV = "ADAPTSTREAM_CPPSTREAM_DIR"
PACKAGED = Path(__file__).resolve().parent.parent / "data" / "cppstream"


def cppstream_dir() -> Path:
    """`$ADAPTSTREAM_CPPSTREAM_DIR` when set, else the gzip copy shipped with the package."""
    env = os.environ.get(ENV)
    return Path(env) if env else PACKAGED


def cppstream_file(name: str, data_dir: str | Path | None = None) -> Path:
    """The sample `name` (plain or `.gz`, both readable by pandas and pyarrow) in `data_dir` or the default folder."""
    folder = Path(data_dir) if data_dir is not None else cppstream_dir()
    for candidate in (folder / name, folder / f"{name}.gz"):
        if candidate.is_file():
            return candidate
    msg = f"data file {name} not found in {folder} (set {ENV} to a folder holding the CppStream samples)"
    raise WorkloadError(msg)
