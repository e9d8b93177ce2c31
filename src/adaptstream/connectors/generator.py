"""The generator connector: writes one dataset file per second at a traffic pattern, then reads them as files.

Writing through the files path keeps replay exact: a restarted query re-reads the files already written, and the
generator resumes at the next second. The writer is a daemon thread in the source's own process.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from adaptstream.config import option
from adaptstream.connectors.base import ConnectorOptions, DatasetRef, Manifest, OnChanged
from adaptstream.connectors.files import FilesConnector
from adaptstream.errors import ConfigError
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

    def start_thread(self, origin: float | None = None) -> threading.Thread:
        """Write from now (the query is ready to take data), or from ``origin`` (the wall time of event time 0)
        when a later one is given; a resumed writer always paces from now."""
        now = self.clock()
        first = max(now, origin) if origin is not None and self.next_second == 0 else now
        self.start = first - self.next_second
        t = threading.Thread(target=self.run, name="adaptstream-generator", daemon=True)
        t.start()
        return t

    def stop(self) -> None:
        self._stop.set()


def read_start_gate(path: str) -> float | None:
    """The wall time written in a start gate file, or None while there is none."""
    try:
        with open(path) as f:
            text = f.read().strip()
    except FileNotFoundError:
        return None
    try:
        return float(text)
    except ValueError:
        from adaptstream.errors import ConnectorError

        msg = f"start gate {path!r} must hold a wall time in seconds (e.g. 1795635739.5), found {text[:40]!r}"
        raise ConnectorError(msg) from None


def open_start_gate(path: str, origin: float) -> None:
    """Tell a gated generator to start its event time 0 at wall time ``origin`` (atomic: write, then rename)."""
    tmp = f"{path}.tmp"
    with open(tmp, "w") as f:
        f.write(repr(float(origin)))
    os.replace(tmp, path)


def gate_ready_path(path: str) -> str:
    """Where a gated generator says its query is up (Spark's start-up done) and waits for the gate."""
    return f"{path}.ready"


@dataclass(frozen=True)
class GeneratorOptions(ConnectorOptions):
    """The generator connector's options (``path``: where it writes its datasets)."""

    generator: str | None = option("generator", None, help="the dataset generator, e.g. linear_road or task_events")
    traffic: str = option("traffic", "constant", "lower", help="the traffic pattern (rows per second over time)")
    rate: int = option("rate", 1000, "int", low=1, help="rows per second")
    duration: float | None = option("duration", None, "duration", help="seconds of input, then the input ends")
    seed: int = option("seed", 0, "int", low=0, help="random seed of the generator and the traffic")
    jitter: float = option("jitter", 0.25, "float", low=0.0, help="relative noise of the rate")
    amplitude: float = option("amplitude", 0.5, "float", low=0.0, high=1.0, help="relative swing of a varying rate")
    period: float = option("period", 60.0, "duration", help="period of a varying rate")
    start_gate: str | None = option(
        "startGate", None, help="write nothing until this file names the wall time of event time 0"
    )


def generator_for(conn: GeneratorOptions):
    from adaptstream.workloads import GENERATORS

    return GENERATORS.get(str(conn.generator))(seed=conn.seed).build()


class GeneratorConnector(FilesConnector):
    name = "generator"
    options_class = GeneratorOptions

    @classmethod
    def check(cls, conn: ConnectorOptions, general: Any) -> None:
        from adaptstream.connectors.traffic import TRAFFIC
        from adaptstream.workloads import GENERATORS

        assert isinstance(conn, GeneratorOptions)
        if not conn.generator:
            msg = "the generator connector needs .option('generator', NAME), e.g. linear_road or task_events"
            raise ConfigError(msg)
        if not (conn.path or general.state_path or general.metrics_path):
            msg = "the generator connector needs a directory to write its datasets to: set path or metricsPath"
            raise ConfigError(msg)
        if conn.period <= 0:
            msg = f"option period must be > 0 seconds, got {conn.period}"
            raise ConfigError(msg)
        if conn.duration is not None and conn.duration <= 0:
            msg = f"option duration must be > 0 seconds, got {conn.duration}"
            raise ConfigError(msg)
        TRAFFIC.get(conn.traffic)
        GENERATORS.get(str(conn.generator))

    @classmethod
    def from_options(cls, opts: Any, manifest: Manifest, state_dir: str, on_changed: OnChanged) -> GeneratorConnector:
        from adaptstream.connectors.traffic import build_traffic

        c: GeneratorOptions = opts.conn
        gen = generator_for(c)
        traffic = build_traffic(c.traffic, c.rate, seed=c.seed, jitter=c.jitter, amplitude=c.amplitude, period=c.period)
        writer = DatasetWriter(
            opts.input_dir, lambda k: gen.generate(k, traffic.rows_at(k)), gen.csv_header(), c.duration
        )
        # A restarted query finds earlier datasets on disk: bring the simulation to where they left it.
        gen.fast_forward(traffic.rows_at(k) for k in range(writer.next_second))
        conn = cls(manifest, writer, opts.drain, opts.sentinel_path, start_gate=c.start_gate)
        conn.generator = gen
        return conn

    @classmethod
    def schema(cls, opts: Any) -> Any:
        return generator_for(opts.conn).spark_schema_ddl

    def event_progress(self, ref: DatasetRef) -> tuple | None:
        """Dataset ``k`` holds event second ``k``, or, for generators with network delays, what
        ``event_stats(k)`` says."""
        if ref.sentinel or self.generator is None:
            return None
        try:
            k = int(os.path.basename(ref.path).split(".")[0])
        except ValueError:
            return None
        origin = self.writer.start
        stats = self.generator.event_stats(k) if hasattr(self.generator, "event_stats") else None
        if stats is None:
            return (origin + k, origin)
        newest, n, total, squares = stats
        return (origin + newest, origin, n, total, squares)

    def __init__(
        self,
        manifest: Manifest,
        writer: DatasetWriter,
        drain: bool = False,
        sentinel_path: str | None = None,
        start_gate: str | None = None,
    ) -> None:
        self.writer = writer
        self.start_gate = start_gate  # a file the multi-query runner writes once every query is up
        self._announced = False  # the gate's ready file is written
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
        """Generated traffic begins once Spark finished its start-up batch, so engine warm-up is not buffering.

        With a start gate it begins at the wall time the gate file names, once that file exists: several queries
        of one experiment start their (slow, serial) Spark start-up first and their input together. The source
        calls this on every poll; a resumed writer (datasets already on disk) ignores the gate."""
        if self._thread is not None:
            return
        if self.start_gate is None or self.writer.next_second > 0:
            self._thread = self.writer.start_thread()
            return
        if not self._announced:  # once, not on every poll: the runner waits for this file
            with open(gate_ready_path(self.start_gate), "w") as f:
                f.write(repr(time.time()))
            self._announced = True
        origin = read_start_gate(self.start_gate)
        if origin is not None:
            self._thread = self.writer.start_thread(origin)

    def poll(self) -> list[DatasetRef]:
        if self.writer.error is not None:
            from adaptstream.errors import ConnectorError

            msg = f"the dataset generator failed: {self.writer.error!r}"
            raise ConnectorError(msg) from self.writer.error
        return super().poll()

    def stop(self) -> None:
        self.writer.stop()
