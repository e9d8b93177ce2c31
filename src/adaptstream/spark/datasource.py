"""``spark.readStream.format("adaptstream")``: the Spark glue around connectors, admission and partitioning.

Spark calls ``latestOffset`` between micro-batches (never while one runs), so the first call after a batch was
planned marks that batch complete: that is how the source measures processing time and dataset latency without
help from the sink. Each planned block becomes exactly one Spark input partition; the rows travel inside the
partition as Arrow IPC bytes, so executors need no shared filesystem (a real cluster works as well as local mode).
"""

from __future__ import annotations

import itertools
import os
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.types import StructType

from adaptstream.admission import AdmissionPolicy, BatchOutcome, PendingDataset, build_admission
from adaptstream.connectors.base import Connector, DatasetRef, Manifest
from adaptstream.connectors.parsing import ParseResult, parse_file
from adaptstream.errors import ConfigError
from adaptstream.metrics.recorder import BatchRecord, DatasetRecord, MetricsRecorder
from adaptstream.spark.options import SourceOptions

FORMAT = "adaptstream"


class BlockPartition(InputPartition):
    """One planned block of a micro-batch, carried as Arrow IPC bytes."""

    def __init__(self, index: int, payload: bytes) -> None:
        super().__init__(index)
        self.payload = payload


def _to_ipc(table: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue().to_pybytes()


@dataclass
class _Planned:
    start: int
    end: int
    admitted_at: float
    planned_at: float
    est_max_latency: float | None
    records: list[DatasetRecord]
    block_rows: list[int] = field(default_factory=list)
    plan_seconds: float = 0.0


def arrow_schema(schema: StructType) -> pa.Schema:
    from pyspark.sql.pandas.types import to_arrow_schema

    return to_arrow_schema(schema, timezone="UTC")


def build_connector(opts: SourceOptions, manifest: Manifest) -> Connector:
    from adaptstream.connectors.files import FilesConnector

    if opts.connector == "files":
        return FilesConnector(manifest, opts.input_dir, opts.drain, opts.sentinel_path)
    from adaptstream.connectors.generator import DatasetWriter, GeneratorConnector
    from adaptstream.connectors.traffic import build_traffic

    gen = generator_for(opts)
    traffic = build_traffic(opts.traffic, opts.rate, seed=opts.seed, jitter=opts.jitter,
                            amplitude=opts.amplitude, period=opts.period)
    writer = DatasetWriter(opts.input_dir, lambda k: gen.generate(k, traffic.rows_at(k)), gen.csv_header(),
                           opts.duration)
    # A restarted query finds earlier datasets on disk: bring the simulation to where they left it.
    gen.fast_forward(traffic.rows_at(k) for k in range(writer.next_second))
    return GeneratorConnector(manifest, writer, opts.drain, opts.sentinel_path)


def generator_for(opts: SourceOptions):
    from adaptstream.workloads import GENERATORS

    return GENERATORS.get(str(opts.generator))(seed=opts.seed).build()


class AdaptstreamStreamReader(DataSourceStreamReader):
    def __init__(self, schema: StructType, options: dict[str, str]) -> None:
        # Spark also builds the reader in a short-lived planning worker and pickles it to ship ``read`` to the
        # executors, so the constructor only reads options: the connector (and the generator thread), the
        # manifest and the policy start lazily, in the long-lived source process that calls latestOffset.
        self.opts = SourceOptions.parse(options)
        self.schema = arrow_schema(schema)
        self._started = False

    def __getstate__(self) -> dict:
        return {"opts": self.opts, "schema": self.schema, "_started": False}

    def _ensure_started(self) -> None:
        if self._started:
            return
        self.manifest = Manifest(os.path.join(self.opts.state_dir, "manifest.jsonl"))
        self.connector = build_connector(self.opts, self.manifest)
        self.policy: AdmissionPolicy = build_admission(
            self.opts.admission, slide=self.opts.slide, trigger=self.opts.trigger, margin=self.opts.margin,
            poll_interval=self.opts.poll_interval)
        self.recorder = MetricsRecorder(self.opts.metrics_path)
        self.partitioner = self._build_partitioner()
        self._parsed: dict[int, ParseResult] = {}
        self._inflight: _Planned | None = None
        self._admissions: dict[int, tuple[float, float | None]] = {}
        self._batches = 0
        self._rows_done = 0
        self._proc_done = 0.0
        self._window_started = time.time()
        self._polls = 0
        self._started = True

    # -- partitioning ---------------------------------------------------------------------------------------
    def _build_partitioner(self) -> Any:
        if self.opts.partitioner == "time":
            return None
        from adaptstream.partitioning import build_partitioner

        if not self.opts.partition_key:
            msg = f"partitioner {self.opts.partitioner!r} needs .option('partitionKey', 'col[,col]')"
            raise ConfigError(msg)
        missing = [c for c in self.opts.partition_key if c not in self.schema.names]
        if missing:
            msg = f"partitionKey column(s) {missing} are not in the schema {self.schema.names}"
            raise ConfigError(msg)
        params = dict(kv.split("=", 1) for kv in self.opts.partitioner_params.split(";") if "=" in kv)
        return build_partitioner(self.opts.partitioner, **params)

    def _keys(self, table: pa.Table) -> np.ndarray:
        from adaptstream.partitioning import key_hash

        return key_hash(table, self.opts.partition_key)

    def _plan_blocks(self, table: pa.Table) -> list[pa.Table]:
        n = self.opts.num_blocks
        if self.partitioner is None:  # "time": arrival-order contiguous blocks, Spark's default shape
            bounds = np.linspace(0, table.num_rows, n + 1).astype(int)
            return [table.slice(int(a), int(b - a)) for a, b in itertools.pairwise(bounds)]
        if self.opts.partition_window > 0 and time.time() - self._window_started >= self.opts.partition_window:
            self.partitioner.on_window_boundary()
            self._window_started = time.time()
        ids = np.asarray(self.partitioner.assign(self._keys(table), n))
        if self.opts.partition_window <= 0:
            self.partitioner.on_window_boundary()  # state covers one micro-batch
        order = np.argsort(ids, kind="stable")
        counts = np.bincount(ids, minlength=n)
        cuts = np.concatenate([[0], np.cumsum(counts)])
        ordered = table.take(pa.array(order))
        return [ordered.slice(int(cuts[k]), int(counts[k])) for k in range(n)]

    # -- parsing ---------------------------------------------------------------------------------------------
    def _parse(self, ref: DatasetRef) -> ParseResult:
        res = self._parsed.get(ref.seq)
        if res is None:
            res = parse_file(ref.path, self.schema, self.opts.file_format, self.opts.header, self.opts.delimiter)
            if res.bad:
                self.recorder.quarantine(ref.seq, ref.path, res.bad)
            self._parsed[ref.seq] = res
            if self.partitioner is not None and res.table.num_rows:
                self.partitioner.observe(self._keys(res.table))  # Prompt Alg. 1: count keys while buffering
        return res

    # -- Spark's streaming reader API ----------------------------------------------------------------------
    def initialOffset(self) -> dict:
        self._ensure_started()
        return {"seq": 0}

    def getDefaultReadLimit(self):
        from pyspark.sql.streaming.datasource import ReadAllAvailable

        return ReadAllAvailable()

    def latestOffset(self, start: dict, limit: Any = None) -> dict:
        self._ensure_started()
        now = time.time()
        s = int(start["seq"])
        self._complete_inflight(now, s)
        self._polls += 1
        if self._polls == 2:  # the first poll comes before Spark's start-up batch 0, the second after it
            self.connector.start()
        for ref in self.connector.poll():
            self._parse(ref)  # parse on arrival, so the cut has little work left (Prompt's early release)
        cap = self.opts.max_datasets_per_batch
        pending_refs = self.manifest.items[s: s + cap] if cap else self.manifest.items[s:]
        if not pending_refs:
            return start
        pending = [PendingDataset(r.seq, r.arrival, self._parse(r).table.num_rows, r.bytes) for r in pending_refs]
        est = self.policy.estimate_max_latency(now, pending)
        if not self.policy.admit(now, pending):
            return start
        end = s + len(pending_refs)
        self._admissions[end] = (now, est)
        release = getattr(self.partitioner, "release", None)
        if release is not None:  # Prompt's early batch release: plan from the statistics gathered while buffering
            release(self.opts.num_blocks)
        return {"seq": end}

    def partitions(self, start: dict, end: dict) -> list[InputPartition]:
        self._ensure_started()
        s, e = int(start["seq"]), int(end["seq"])
        t0 = time.time()
        refs = self.manifest.slice(s, e)
        # .get, not .pop: a query that reads the source twice (a self-join) plans the same range twice.
        # A replay after a restart was never admitted by this process: its admission time is now.
        admitted_at, est = self._admissions.get(e, (t0, None))
        records, tables = [], []
        for ref in refs:
            res = self._parse(ref)
            tables.append(res.table)
            records.append(DatasetRecord(ref.seq, ref.path, ref.arrival, res.table.num_rows, ref.bytes,
                                         len(res.bad), ref.sentinel, admitted_at=admitted_at))
        table = pa.concat_tables(tables) if tables else self.schema.empty_table()
        blocks = self._plan_blocks(table)
        parts: list[InputPartition] = [BlockPartition(k, _to_ipc(b)) for k, b in enumerate(blocks)]
        if refs:
            self._inflight = _Planned(s, e, admitted_at, t0, est, records, [b.num_rows for b in blocks],
                                      time.time() - t0)
        return parts

    def read(self, partition: BlockPartition):
        reader = pa.ipc.open_stream(partition.payload)
        yield from reader

    def commit(self, end: dict) -> None:
        if not self._started:
            return
        e = int(end["seq"])
        for seq in [k for k in self._parsed if k < e and (self._inflight is None or k < self._inflight.start)]:
            del self._parsed[seq]

    def stop(self) -> None:
        if self._started:
            self.connector.stop()

    # -- accounting ------------------------------------------------------------------------------------------
    def _complete_inflight(self, now: float, start: int) -> None:
        p = self._inflight
        if p is None or p.end != start:
            return
        self._inflight = None
        self._admissions = {k: v for k, v in self._admissions.items() if k > p.end}
        for r in p.records:
            r.batch, r.completed_at = self._batches, now
        data = [r for r in p.records if not r.sentinel]
        rows = sum(r.rows for r in p.records)
        proc = max(now - p.admitted_at, 1e-9)
        self._rows_done += rows
        self._proc_done += proc
        max_lat = max((r.latency for r in data), default=0.0)
        self.recorder.datasets(p.records)
        self.recorder.batch(BatchRecord(
            batch=self._batches, start=p.start, end=p.end, datasets=len(p.records), rows=rows,
            bytes=sum(r.bytes for r in p.records), quarantined=sum(r.quarantined for r in p.records),
            admitted_at=p.admitted_at, planned_at=p.planned_at, completed_at=now,
            buffering_time=max((r.buffering for r in data), default=0.0), processing_time=proc,
            max_latency=max_lat, avg_throughput=self._rows_done / self._proc_done,
            est_max_latency=p.est_max_latency, admission=self.opts.admission, block_rows=p.block_rows,
            plan_seconds=p.plan_seconds, partitioner=self.opts.partitioner,
            extra={k: v for k, v in self.policy.state().items() if v is not None},
        ))
        self.policy.on_batch_complete(BatchOutcome(rows, p.admitted_at, now, max_lat, p.est_max_latency))
        self._batches += 1
        for seq in range(p.start, p.end):
            self._parsed.pop(seq, None)


class AdaptstreamDataSource(DataSource):
    """Register with :func:`register`, then ``spark.readStream.format("adaptstream")``."""

    @classmethod
    def name(cls) -> str:
        return FORMAT

    def schema(self) -> str | StructType:
        opts = SourceOptions.parse(self.options)
        if opts.connector == "generator":
            return generator_for(opts).spark_schema_ddl
        msg = "adaptstream needs a schema: spark.readStream.format('adaptstream').schema(SCHEMA)"
        raise ConfigError(msg)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return AdaptstreamStreamReader(schema, dict(self.options))


def register(spark) -> None:
    """Make ``format("adaptstream")`` available in this SparkSession."""
    spark.dataSource.register(AdaptstreamDataSource)
