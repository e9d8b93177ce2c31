"""The generator connector: writes one dataset file per second at a traffic pattern, then reads them as files.

Writing through the files path keeps replay exact: a restarted query re-reads the files already written, and the
generator resumes at the next second. The writer is a daemon thread in the source's own process.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from typing import Any

import pyarrow as pa

from adaptstream.connectors.base import DatasetRef, Manifest
from adaptstream.connectors.files import FilesConnector
from adaptstream.workloads.io import dataset_file_name, write_dataset


class DatasetWriter:
    """Writes dataset ``k`` at wall time start + k + 1 (a dataset collects one second of rows)."""

    def __init__(
        self,
        out_dir: str,
        make_rows: Callable[[int], pa.Table],
        header: bool,
        duration: float | None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.out_dir = out_dir
        self.make_rows = make_rows
        self.header = header
        self.duration = duration
        self.clock = clock
        os.makedirs(out_dir, exist_ok=True)
        self.next_second = sum(1 for n in os.listdir(out_dir) if n.endswith(".csv") and n[0] not in "._")
        self.start = clock() - self.next_second
        self._stop = threading.Event()
        self.error: BaseException | None = None
        self.finished = threading.Event()
        self._ready: pa.Table | None = None

    def total_seconds(self) -> int | None:
        return None if self.duration is None else round(self.duration)

    def step(self) -> bool:
        """Write every dataset that is due; False once the duration is over.

        The next dataset is built ahead of its due time, so a slow generator step delays no arrival."""
        total = self.total_seconds()
        while total is None or self.next_second < total:
            k = self.next_second
            if self._ready is None:
                self._ready = self.make_rows(k)
            if self.clock() < self.start + k + 1:
                return True
            write_dataset(self._ready, os.path.join(self.out_dir, dataset_file_name(k)), "csv", self.header)
            self._ready = None
            self.next_second += 1
        return False

    def run(self) -> None:
        try:
            while not self._stop.is_set() and self.step():
                wait = self.start + self.next_second + 1 - self.clock()
                self._stop.wait(max(0.0, min(wait, 0.5)))
        except BaseException as e:  # surfaced by the source on its next poll
            self.error = e
        finally:
            self.finished.set()

    def start_thread(self) -> threading.Thread:
        self.start = self.clock() - self.next_second  # pace from now: the query is ready to take data
        t = threading.Thread(target=self.run, name="adaptstream-generator", daemon=True)
        t.start()
        return t

    def stop(self) -> None:
        self._stop.set()


class GeneratorConnector(FilesConnector):
    def __init__(
        self, manifest: Manifest, writer: DatasetWriter, drain: bool = False, sentinel_path: str | None = None
    ) -> None:
        self.writer = writer
        super().__init__(
            manifest,
            writer.out_dir,
            drain,
            sentinel_path,
            finished=lambda: writer.finished.is_set() and writer.error is None,
            stable_seconds=0,
        )  # the writer renames complete files into place: no wait needed
        self._thread: threading.Thread | None = None
        self.generator: Any = None  # the dataset generator, set by the source (event-time progress per dataset)

    def start(self) -> None:
        """Generated traffic begins once Spark finished its start-up batch, so engine warm-up is not buffering."""
        if self._thread is None:
            self._thread = self.writer.start_thread()

    def poll(self) -> list[DatasetRef]:
        if self.writer.error is not None:
            from adaptstream.errors import ConnectorError

            msg = f"the dataset generator failed: {self.writer.error!r}"
            raise ConnectorError(msg) from self.writer.error
        return super().poll()

    def stop(self) -> None:
        self.writer.stop()
