"""The files connector: a watched directory where each new file (or each run of rows appended to one) is a dataset.

Admission rule (docs/source.md), so that no row is read twice, lost, or read from a half-written file:
* Names that start with '.' or '_', or end in '._COPYING_', '.tmp', '.crc', '.swp', '.part' or '~', and names
  matching the ``ignorePattern`` option are never read: write under such a name and rename into place.
* A file is admitted once it has not been modified for ``fileStableSeconds`` (its modification time is that old).
  Writers that move complete files in need no wait (set 0), as with Spark's own file source.
* The admitted range is recorded with the file's size and a fingerprint; executors read exactly those bytes.
* Rows appended to an admitted file later become a new dataset (the range after the admitted bytes), once stable.
  A file that shrank, or whose admitted bytes changed, is not read again: the event is quarantined and counted.
Files are ordered by modification time, then name. With ``drain`` and a sentinel file, the sentinel is appended
once the directory stopped delivering new files.

Parquet (``fileFormat=parquet``): a file is one dataset, admitted whole once it is stable and its footer is complete
(it ends with the Parquet magic bytes and its metadata reads), so a file still being written is never admitted;
executors read the whole file (connectors/parsing.py). Rows cannot be appended to a Parquet file: one that changes
after admission is quarantined as a file event, and one that stays incomplete for ``fileStableSeconds`` is
quarantined as truncated. Write Parquet under a temporary name and rename it into place, as Spark does.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

from adaptstream.config import option
from adaptstream.connectors.base import Connector, ConnectorOptions, DatasetRef, Manifest, OnChanged, fingerprint
from adaptstream.errors import ConfigError, ConnectorError

TEMP_SUFFIXES = ("._COPYING_", ".tmp", ".crc", ".swp", ".part", "~")


def ignored(name: str, pattern: re.Pattern[str] | None = None) -> bool:
    """True for hidden, temporary and in-progress names that must never be read."""
    if not name or name[0] in "._" or name.endswith(TEMP_SUFFIXES):
        return True
    return bool(pattern is not None and pattern.search(name))


PARQUET_MAGIC = b"PAR1"


def parquet_complete(path: str, size: int) -> str | None:
    """None when ``path`` is a whole Parquet file (magic bytes at both ends, metadata readable), else why not."""
    import pyarrow.parquet as pq

    try:
        with open(path, "rb") as f:
            head = f.read(4)
            f.seek(max(0, size - 4))
            tail = f.read(4)
        if size < 12 or head != PARQUET_MAGIC or tail != PARQUET_MAGIC:
            return f"not a complete Parquet file ({size} bytes, no Parquet footer): truncated, or still being written"
        pq.read_metadata(path)
    except (OSError, ValueError) as e:  # pyarrow's ArrowInvalid is a ValueError
        return f"not a readable Parquet file: {e}"
    return None


@dataclass(frozen=True)
class FilesOptions(ConnectorOptions):
    """The files connector's options (``path`` is the watched directory)."""

    file_stable_seconds: float = option(
        "fileStableSeconds", 0.5, "duration", help="a file is admitted once unmodified for this long (0: at once)"
    )
    ignore_pattern: str | None = option("ignorePattern", None, "regex", help="file names matching it are never read")


class FilesConnector(Connector):
    name = "files"
    options_class: ClassVar[type[ConnectorOptions]] = FilesOptions

    @classmethod
    def check(cls, conn: ConnectorOptions, general: Any) -> None:
        if not conn.path:
            msg = "the files connector needs .option('path', DIR): the directory it watches for new files"
            raise ConfigError(msg)
        if general.drain and not general.sentinel_path:
            msg = "drain needs sentinelPath: the end-of-input rows that move the watermark past the last window"
            raise ConfigError(msg)

    @classmethod
    def from_options(cls, opts: Any, manifest: Manifest, state_dir: str, on_changed: OnChanged) -> FilesConnector:
        conn: FilesOptions = opts.conn
        return cls(
            manifest,
            opts.input_dir,
            opts.drain,
            opts.sentinel_path,
            stable_seconds=conn.file_stable_seconds,
            ignore_pattern=conn.ignore_pattern,
            on_changed=on_changed,
            whole_files=opts.file_format == "parquet",
        )

    @classmethod
    def schema(cls, opts: Any) -> Any:
        """Parquet carries its schema: the first file's, when the user gives none (CSV and JSON need one)."""
        if opts.file_format != "parquet":
            return None
        import pyarrow.parquet as pq
        from pyspark.sql.pandas.types import from_arrow_schema

        path = str(opts.conn.path)
        names = sorted(n for n in os.listdir(path) if not ignored(n)) if os.path.isdir(path) else []
        if not names:
            msg = (
                f"no Parquet file in {path} to take the schema from: give one with "
                "spark.readStream.format('adaptstream').schema(SCHEMA)"
            )
            raise ConfigError(msg)
        try:
            return from_arrow_schema(pq.read_schema(os.path.join(path, names[0])), prefer_timestamp_ntz=False)
        except (OSError, ValueError) as e:
            msg = f"cannot read the schema of {os.path.join(path, names[0])}: {e}; give the schema with .schema(SCHEMA)"
            raise ConfigError(msg) from None

    def __init__(
        self,
        manifest: Manifest,
        path: str,
        drain: bool = False,
        sentinel_path: str | None = None,
        finished: Callable[[], bool] | None = None,
        stable_seconds: float = 0.5,
        ignore_pattern: str | None = None,
        clock: Callable[[], float] = time.time,
        on_changed: Callable[[str, str], None] | None = None,
        whole_files: bool = False,
    ) -> None:
        super().__init__(manifest)
        if not os.path.isdir(path):
            msg = f"files connector: input directory {path!r} does not exist"
            raise ConnectorError(msg)
        self.path = path
        self.drain = drain
        self.sentinel_path = sentinel_path
        self.stable_seconds = stable_seconds
        self.pattern = re.compile(ignore_pattern) if ignore_pattern else None
        self.clock = clock
        self._finished = finished  # callable: True once the writer of this directory is done
        self._on_changed = on_changed  # (path, reason) for files that changed after admission
        self._polls_without_news = 0
        self._started = clock()
        self._last_seen: dict[str, tuple[int, int]] = {}  # path -> (size, mtime_ns) at the previous scan
        self._reported: set[str] = set()  # changed files already reported
        self.whole_files = whole_files  # Parquet: a file is one dataset, admitted whole once its footer is complete

    # -- scanning -------------------------------------------------------------------------------------------
    def _candidates(self) -> list[tuple[int, str, int]]:
        """Files with bytes not yet admitted that are stable now, as (mtime_ns, path, size), in arrival order."""
        now = self.clock()
        found, seen = [], {}
        with os.scandir(self.path) as it:
            for entry in it:
                if ignored(entry.name, self.pattern) or not entry.is_file():
                    continue
                st = entry.stat()
                key = (st.st_size, st.st_mtime_ns)
                seen[entry.path] = key
                done = self.manifest.admitted(entry.path)
                if st.st_size == done or entry.path in self._reported:
                    continue
                if now - st.st_mtime_ns / 1e9 < self.stable_seconds:
                    continue  # modified less than stable_seconds ago: may still be being written
                found.append((st.st_mtime_ns, entry.path, st.st_size))
        self._last_seen = seen
        found.sort()
        return found

    def _range(self, path: str, size: int) -> tuple[int, int] | None:
        """(start, length) of the bytes to admit, or None when the file changed under an earlier admission."""
        done = self.manifest.admitted(path)
        if self.whole_files:
            return self._whole(path, size, done)
        if done == 0:
            return 0, size
        if size < done:
            self._changed(path, f"file shrank from {done} to {size} bytes after admission")
            return None
        last = self.manifest.last[path]
        if last.fingerprint and fingerprint(path, last.start, last.bytes) != last.fingerprint:
            self._changed(path, "bytes already admitted were rewritten")
            return None
        return done, size - done

    def _whole(self, path: str, size: int, done: int) -> tuple[int, int] | None:
        if done:
            self._changed(path, f"Parquet file changed after admission ({done} -> {size} bytes)")
            return None
        why = parquet_complete(path, size)
        if why is not None:
            self._changed(path, why)
            return None
        return 0, size

    def _changed(self, path: str, reason: str) -> None:
        self._reported.add(path)
        if self._on_changed is not None:
            hint = "write a new file" if self.whole_files else "append rows, or write a new file"
            self._on_changed(path, f"{reason}; the new content was not read ({hint})")

    def _arrival(self, mtime_ns: int) -> float:
        # A file written before the query started enters the system when we first see it.
        mtime = mtime_ns / 1e9
        return mtime if mtime >= self._started else self.clock()

    def poll(self) -> list[DatasetRef]:
        entries = []
        for mtime_ns, path, size in self._candidates():
            rng = self._range(path, size)
            if rng is None or rng[1] <= 0:
                continue
            start, length = rng
            entries.append((path, self._arrival(mtime_ns), length, False, start, fingerprint(path, start, length)))
        refs = self.manifest.append(entries)
        if refs:
            self._polls_without_news = 0
            return refs
        self._polls_without_news += 1
        if self._should_seal():
            path = str(self.sentinel_path)
            size = os.path.getsize(path)
            return self.manifest.append([(path, self.clock(), size, True, 0, fingerprint(path, 0, size))])
        return []

    def pending_unstable(self) -> bool:
        """True while a file is visible but not yet admitted (being written, or waiting to be stable)."""
        return any(
            self.manifest.admitted(p) != size and p not in self._reported for p, (size, _) in self._last_seen.items()
        )

    # -- end of input ---------------------------------------------------------------------------------------
    def _input_done(self) -> bool:
        if self._finished is not None:
            return bool(self._finished())
        # a static directory: two empty scans in a row and nothing still being written
        return self._polls_without_news >= 2 and not self.pending_unstable()

    def _should_seal(self) -> bool:
        return self.drain and self.sentinel_path is not None and not self.sealed() and self._input_done()

    def sealed(self) -> bool:
        return any(r.sentinel for r in self.manifest.items[-1:])

    def exhausted(self) -> bool:
        return self.sealed() if self.drain else (self._finished is not None and bool(self._finished()))
