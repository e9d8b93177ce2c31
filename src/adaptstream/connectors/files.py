"""The files connector: a watched directory where each new file is one dataset (LMStream's model).

Files are ordered by modification time (the moment a writer finished them), then name. Writers should write to a
temporary name starting with '.' or '_' and rename, as Spark's file source expects too; such names are ignored.
With ``drain`` and a sentinel file, the sentinel is appended once the directory stopped delivering new files.
"""

from __future__ import annotations

import os
import time

from adaptstream.connectors.base import Connector, DatasetRef, Manifest
from adaptstream.errors import ConnectorError


class FilesConnector(Connector):
    def __init__(self, manifest: Manifest, path: str, drain: bool = False, sentinel_path: str | None = None,
                 finished=None) -> None:
        super().__init__(manifest)
        if not os.path.isdir(path):
            msg = f"files connector: input directory {path!r} does not exist"
            raise ConnectorError(msg)
        self.path = path
        self.drain = drain
        self.sentinel_path = sentinel_path
        self._finished = finished  # callable: True once the writer of this directory is done
        self._polls_without_news = 0
        self._started = time.time()

    def _scan(self) -> list[tuple[float, str, int]]:
        """New files as (arrival, path, size), ordered by modification time, then name."""
        found = []
        with os.scandir(self.path) as it:
            for entry in it:
                if entry.name[0] in "._" or not entry.is_file() or entry.path in self.manifest.known:
                    continue
                st = entry.stat()
                found.append((st.st_mtime, entry.path, st.st_size))
        found.sort()
        now = time.time()
        # A file written before the query started enters the system when we first see it.
        return [(mtime if mtime >= self._started else now, path, size) for mtime, path, size in found]

    def poll(self) -> list[DatasetRef]:
        new = self._scan()
        refs = self.manifest.append([(p, arrival, size, False) for arrival, p, size in new])
        if refs:
            self._polls_without_news = 0
            return refs
        self._polls_without_news += 1
        if self._should_seal():
            size = os.path.getsize(self.sentinel_path)  # type: ignore[arg-type]
            return self.manifest.append([(self.sentinel_path, time.time(), size, True)])
        return []

    def _input_done(self) -> bool:
        if self._finished is not None:
            return bool(self._finished())
        return self._polls_without_news >= 2  # a static directory: two empty scans in a row

    def _should_seal(self) -> bool:
        return (self.drain and self.sentinel_path is not None and not self.sealed() and self._input_done())

    def sealed(self) -> bool:
        return any(r.sentinel for r in self.manifest.items[-1:])

    def exhausted(self) -> bool:
        return self.sealed() if self.drain else (self._finished is not None and bool(self._finished()))
