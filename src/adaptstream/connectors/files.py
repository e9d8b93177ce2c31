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
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable

from adaptstream.connectors.base import Connector, DatasetRef, Manifest, fingerprint
from adaptstream.errors import ConnectorError

TEMP_SUFFIXES = ("._COPYING_", ".tmp", ".crc", ".swp", ".part", "~")


def ignored(name: str, pattern: re.Pattern[str] | None = None) -> bool:
    """True for hidden, temporary and in-progress names that must never be read."""
    if not name or name[0] in "._" or name.endswith(TEMP_SUFFIXES):
        return True
    return bool(pattern is not None and pattern.search(name))


class FilesConnector(Connector):
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

    def _changed(self, path: str, reason: str) -> None:
        self._reported.add(path)
        if self._on_changed is not None:
            self._on_changed(path, reason + "; the new content was not read (append rows, or write a new file)")

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
