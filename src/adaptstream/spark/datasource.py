"""``spark.readStream.format("adaptstream")``: Spark's streaming-source contract around connectors, admission and
planning.

Data path: the connector records datasets (byte ranges of files) in a durable manifest; offsets are manifest
positions. ``latestOffset(start, limit)`` lets the admission policy decide when to cut a micro-batch, within the
read limit (``maxFilesPerTrigger`` / ``maxBytesPerTrigger`` / ``maxRowsPerTrigger``, 256 MiB by default);
``partitions`` plans input partitions from metadata (spark/planner.py); executors read and parse (spark/read.py);
the batch is accounted when it completes (spark/accounting.py). ``Trigger.AvailableNow`` drains what is present
when the query starts in bounded batches, then stops.

Spark builds the reader in a short-lived planning worker and pickles it to ship ``read`` to the executors, so the
constructor only reads options; everything with state starts lazily in the long-lived source process.
"""

from __future__ import annotations

import os
import time
import uuid

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxBytes,
    ReadMaxFiles,
    ReadMaxRows,
    ReadMinRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import StructType

from adaptstream.admission import PendingDataset, build_admission
from adaptstream.connectors.base import Connector, DatasetRef, Manifest, StateLock
from adaptstream.connectors.redis import RedisConnector
from adaptstream.errors import AdaptstreamError, ConfigError, ConnectorError
from adaptstream.metrics.recorder import MetricsRecorder
from adaptstream.policy import PolicyStateFile
from adaptstream.spark.accounting import Accountant, Planned, Quarantine
from adaptstream.spark.options import SourceOptions
from adaptstream.spark.planner import DriverPlanner, plan_ranges, plan_slices, read_block_count
from adaptstream.spark.read import SlicePartition, read_partition

FORMAT = "adaptstream"


def arrow_schema(schema: StructType) -> pa.Schema:
    from pyspark.sql.pandas.types import to_arrow_schema

    return to_arrow_schema(schema, timezone="UTC")


def build_connector(opts: SourceOptions, manifest: Manifest, on_changed=None, state_dir: str = "") -> Connector:
    from adaptstream.connectors.files import FilesConnector

    if opts.connector == "redis":
        return RedisConnector(
            manifest,
            opts.redis_address(),
            state_dir,
            group_seconds=opts.dataset_seconds,
            max_piece=opts.max_dataset_entries,
            starting=opts.starting_position,
            timeout=opts.redis_timeout,
            drain=opts.drain,
            sentinel_path=opts.sentinel_path,
        )
    if opts.connector == "files":
        return FilesConnector(
            manifest,
            opts.input_dir,
            opts.drain,
            opts.sentinel_path,
            stable_seconds=opts.file_stable_seconds,
            ignore_pattern=opts.ignore_pattern,
            on_changed=on_changed,
        )
    from adaptstream.connectors.generator import DatasetWriter, GeneratorConnector
    from adaptstream.connectors.traffic import build_traffic

    gen = generator_for(opts)
    traffic = build_traffic(
        opts.traffic, opts.rate, seed=opts.seed, jitter=opts.jitter, amplitude=opts.amplitude, period=opts.period
    )
    writer = DatasetWriter(
        opts.input_dir, lambda k: gen.generate(k, traffic.rows_at(k)), gen.csv_header(), opts.duration
    )
    # A restarted query finds earlier datasets on disk: bring the simulation to where they left it.
    gen.fast_forward(traffic.rows_at(k) for k in range(writer.next_second))
    conn = GeneratorConnector(manifest, writer, opts.drain, opts.sentinel_path, start_gate=opts.start_gate)
    conn.generator = gen  # event-time progress of each dataset, for the scheduling controller
    return conn


def generator_for(opts: SourceOptions):
    from adaptstream.workloads import GENERATORS

    return GENERATORS.get(str(opts.generator))(seed=opts.seed).build()


class AdaptstreamStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, schema: StructType, options: dict[str, str]) -> None:
        self.opts = SourceOptions.parse(options)
        self.schema = arrow_schema(schema)
        self.fmt = self.opts.file_format_spec()
        self._started = False
        self._query_id: str | None = None
        self._available_now = False

    def __getstate__(self) -> dict:
        return {
            "opts": self.opts,
            "schema": self.schema,
            "fmt": self.fmt,
            "_started": False,
            "_query_id": None,
            "_available_now": False,
        }

    # -- start-up --------------------------------------------------------------------------------------------
    def _ensure_started(self, offset: dict | None = None) -> None:
        """Open the state directory named by ``offset`` (a restart) or a new one (a new query), lock it, and build
        the connector, the policy and the accounting."""
        if self._started:
            self._check_offset(offset)
            return
        qid = offset.get("query") if offset is not None else self._query_id
        self._query_id = qid if self.opts.per_query_state else None
        self.state_dir = self.opts.state_dir(self._query_id)
        self.lock = StateLock(self.state_dir)
        self.manifest = Manifest(os.path.join(self.state_dir, "manifest.jsonl"))
        self.parts_dir = os.path.join(self.state_dir, "parts")
        self.quarantine = Quarantine(self.opts.metrics_path or self.state_dir)
        self.connector = build_connector(self.opts, self.manifest, self._file_changed, self.state_dir)
        self.redis = self.connector if isinstance(self.connector, RedisConnector) else None
        policy = build_admission(
            self.opts.admission,
            slide=self.opts.slide,
            trigger=self.opts.trigger,
            margin=self.opts.margin,
            poll_interval=self.opts.poll_interval,
        )
        self.accounts = Accountant(
            MetricsRecorder(self.opts.metrics_path),
            self.quarantine,
            self.parts_dir,
            policy,
            self.opts.admission,
            self.opts.partitioner,
        )
        self.planner = self._build_planner()
        # What the policies learned survives a restart: restored before anything is observed, saved at every commit.
        self.policy_state = PolicyStateFile(os.path.join(self.state_dir, "policies.json"))
        self.policy_state.restore(**self._policies())
        self._admissions: dict[int, tuple[float, float | None]] = {}
        self._target: int | None = None  # Trigger.AvailableNow: the last offset to deliver
        self._polls = 0
        self.sched = self._controller_client()
        self._started = True
        if self.redis is not None:
            self._check_offset(offset)  # a restart: the checkpoint's entry IDs must be the state directory's

    def _controller_client(self):
        """The application's scheduling controller (control/), when the ``controller`` option names one."""
        if not self.opts.controller:
            return None
        from adaptstream.control.client import ControllerClient

        name = self.opts.controller_query or self._query_id or os.path.basename(self.state_dir.rstrip("/"))
        streams = {"main": (self.opts.window_period, self.opts.watermark_delay)} if self.opts.window_period else {}
        log_path = os.path.join(self.opts.metrics_path or self.state_dir, "controller.log")
        return ControllerClient(
            self.opts.controller, name, streams, log_path=log_path, secret=self.opts.controller_secret
        )

    def _event_progress(self, ref: DatasetRef) -> None:
        """Report a new dataset's event-time progress (its newest event's generation time and the network delays
        of its events) to the controller. Known for generated input only: dataset ``k`` holds event second ``k``,
        or, for generators with network delays, what ``event_stats(k)`` says; plain files carry none."""
        gen = getattr(self.connector, "generator", None)
        writer = getattr(self.connector, "writer", None)
        if self.sched is None or not self.opts.window_period or gen is None or writer is None or ref.sentinel:
            return
        try:
            k = int(os.path.basename(ref.path).split(".")[0])
        except ValueError:
            return
        origin = writer.start
        stats = gen.event_stats(k) if hasattr(gen, "event_stats") else None
        if stats is None:
            self.sched.report_progress("main", ref.seq, ref.arrival, origin + k, origin)
        else:
            newest, n, total, squares = stats
            self.sched.report_progress("main", ref.seq, ref.arrival, origin + newest, origin, n, total, squares)

    def _check_offset(self, offset: dict | None) -> None:
        if offset is not None and self.redis is not None and "ids" in offset:
            ids = self.redis.ids_at(int(offset["seq"]))
            if offset["ids"] != ids:
                msg = (
                    f"offset {offset} does not match the source state in {self.state_dir} (its manifest gives "
                    f"{ids} at that position); the checkpoint and statePath belong to different queries"
                )
                raise ConnectorError(msg)
        if offset is None or not self.opts.per_query_state:
            return
        if offset.get("query") != self._query_id:
            msg = (
                f"offset {offset} belongs to source state {offset.get('query')!r}, not {self._query_id!r}; "
                "the checkpoint and the source state directory do not match"
            )
            raise ConnectorError(msg)

    def _load_range(self, ref: DatasetRef):
        """The driver path (readOn=driver, skew-aware partitioners) reads a Redis entry range itself."""
        from adaptstream.connectors.redis import read_piece

        assert self.redis is not None
        return read_piece(
            self.redis.r,
            self.redis.addr,
            ref.seq,
            ref.path,
            ref.first_id,
            ref.last_id,
            ref.entries,
            self.schema,
            self.opts.redis_entry_format(),
            self.opts.redis_timeout,
        )

    def _build_planner(self) -> DriverPlanner | None:
        load = self._load_range if self.redis is not None else None
        if self.opts.partitioner == "time":
            if self.opts.read_on == "executors":
                return None
            return DriverPlanner(None, (), self.schema, self.fmt, self.parts_dir, load=load)
        from adaptstream.partitioning import build_partitioner

        if not self.opts.partition_key:
            msg = f"partitioner {self.opts.partitioner!r} needs .option('partitionKey', 'col[,col]')"
            raise ConfigError(msg)
        missing = [c for c in self.opts.partition_key if c not in self.schema.names]
        if missing:
            msg = f"partitionKey column(s) {missing} are not in the schema {self.schema.names}"
            raise ConfigError(msg)
        params = dict(kv.split("=", 1) for kv in self.opts.partitioner_params.split(";") if "=" in kv)
        return DriverPlanner(
            build_partitioner(self.opts.partitioner, **params),
            self.opts.partition_key,
            self.schema,
            self.fmt,
            self.parts_dir,
            self.opts.partition_window,
            load=load,
        )

    def _policies(self) -> dict:
        return {"admission": self.accounts.policy, "partitioner": self.planner.partitioner if self.planner else None}

    def _file_changed(self, path: str, reason: str) -> None:
        self.quarantine.add([{"seq": None, "path": path, "row": None, "offset": None, "raw": None, "reason": reason}])

    def _offset(self, seq: int) -> dict:
        if self.redis is not None:  # the last entry ID per stream, beside the manifest position
            return {"seq": seq, "ids": self.redis.ids_at(seq)}
        return {"seq": seq, "query": self._query_id} if self._query_id else {"seq": seq}

    # -- Spark's streaming reader API ----------------------------------------------------------------------
    def initialOffset(self) -> dict:
        if self.opts.connector == "redis":
            self._ensure_started(None)
            return self._offset(0)
        if not self._started and self.opts.per_query_state and self._query_id is None:
            self._query_id = uuid.uuid4().hex[:12]
        return {"seq": 0, "query": self._query_id} if self.opts.per_query_state else {"seq": 0}

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.opts.max_rows:
            return ReadMaxRows(self.opts.max_rows)
        if self.opts.max_files:
            return ReadMaxFiles(self.opts.max_files)
        if self.opts.max_bytes:
            return ReadMaxBytes(self.opts.max_bytes)
        return ReadAllAvailable()

    def reportLatestOffset(self) -> dict | None:
        if not self._started:
            return None
        return self._offset(len(self.manifest))

    def prepareForTriggerAvailableNow(self) -> None:
        self._available_now = True

    def latestOffset(self, start: dict, limit: ReadLimit | None = None) -> dict:
        self._ensure_started(start)
        now = time.time()
        s = int(start["seq"])
        self._complete(s, now)
        self._polls += 1
        if self._polls >= 2:  # the first poll comes before Spark's start-up batch 0, the second after it
            self.connector.start()  # idempotent; a gated generator waits here for its gate
        if self._target is None:
            if self._available_now and self.redis is not None:
                self.redis.freeze()  # every entry present now, none added later: walk to it now
                while not self.redis.caught_up():
                    self._poll_connector()
            self._poll_connector()
            if self._available_now:
                self._target = len(self.manifest)  # everything present now, nothing that arrives later
        if self.redis is not None:
            self.redis.check_not_lost(s)
        upto = self._target if self._target is not None else len(self.manifest)
        refs = self._capped(self.manifest.items[s:upto], limit)
        if not refs:
            if self.sched is not None:
                self.sched.poll(False)
            return start
        pending = [PendingDataset(r.seq, r.arrival, self._rows(r), r.bytes) for r in refs]
        policy = self.accounts.policy
        est = policy.estimate_max_latency(now, pending)
        if self._target is None and not self._enough_rows(pending, limit):
            return start
        if self._target is None and not policy.admit(now, pending):
            if self.sched is not None:
                self.sched.poll(False)
            return start
        # the controller gates admission across the application's queries (an unreachable one grants)
        if self._target is None and self.sched is not None:
            oldest = min(r.arrival for r in refs)
            if not self.sched.poll(True, sum(d.rows for d in pending), oldest):
                return start
        end = s + len(refs)
        self._admissions[end] = (now, est)
        if self.planner is not None:
            self.planner.release(self._num_blocks())
        return self._offset(end)

    def _poll_connector(self) -> None:
        new = self.connector.poll()
        for ref in new:
            self._event_progress(ref)
        if self.planner is not None:
            for ref in new:
                self.planner.parse(ref)  # parse on arrival: keys counted while buffering, little work at the cut

    def _rows(self, ref: DatasetRef) -> int:
        if ref.entries >= 0 and self.planner is None:
            return ref.entries  # a Redis entry range: its exact count is known before it is read
        return self.planner.rows(ref) if self.planner is not None else self.accounts.rows.estimate(ref)

    def _capped(self, refs: list[DatasetRef], limit: ReadLimit | None) -> list[DatasetRef]:
        """The longest prefix within the read limit (at least one dataset: a dataset is never split)."""
        if isinstance(limit, ReadAllAvailable) or not refs:
            return refs
        max_files, max_bytes, max_rows = self.opts.max_files, self.opts.max_bytes, self.opts.max_rows
        if isinstance(limit, ReadMaxFiles):
            max_files = limit.max_files
        elif isinstance(limit, ReadMaxBytes):
            max_bytes = limit.max_bytes
        elif isinstance(limit, ReadMaxRows):
            max_rows = limit.max_rows
        n, nbytes, nrows = 0, 0, 0
        for ref in refs:
            nbytes += ref.bytes
            nrows += self._rows(ref) if max_rows else 0
            over = (
                (max_files and n + 1 > max_files)
                or (max_bytes and nbytes > max_bytes)
                or (max_rows and nrows > max_rows)
            )
            if over and n > 0:
                break
            n += 1
        return refs[:n]

    @staticmethod
    def _enough_rows(pending: list[PendingDataset], limit: ReadLimit | None) -> bool:
        return not isinstance(limit, ReadMinRows) or sum(d.rows for d in pending) >= limit.min_rows

    def partitions(self, start: dict, end: dict) -> list[InputPartition]:
        self._ensure_started(start)
        s, e = int(start["seq"]), int(end["seq"])
        t0 = time.time()
        refs = self.manifest.slice(s, e)
        if not refs:
            return []
        # .get, not .pop: a query that reads the source twice (a self-join) plans the same range twice.
        # A replay after a restart was never admitted by this process: its admission time is now.
        admitted_at, est = self._admissions.get(e, (t0, None))
        num_blocks = self._num_blocks()
        if self.planner is not None:
            parts, block_rows = self.planner.plan(refs, num_blocks)
            blocks: list[list[int]] = []
        else:
            if self.redis is not None:
                parts = plan_ranges(
                    refs,
                    num_blocks,
                    self.opts.max_partition_bytes,
                    self.parts_dir,
                    self.redis.addr,
                    self.opts.redis_entry_format(),
                    self.opts.redis_timeout,
                )
            else:
                parts = plan_slices(refs, num_blocks, self.opts.max_partition_bytes, self.parts_dir)
            block_rows = None
            blocks = [[x.seq for x in (p.slices if isinstance(p, SlicePartition) else p.ranges)] for p in parts]  # type: ignore[attr-defined]
        self.accounts.inflight = Planned(s, e, admitted_at, t0, est, refs, blocks, block_rows, time.time() - t0)
        return parts

    def _num_blocks(self) -> int:
        return read_block_count(self.opts.blocks_file, self.opts.num_blocks)

    def read(self, partition: InputPartition):
        return read_partition(partition, self.schema, self.fmt)

    def commit(self, end: dict) -> None:
        if not self._started:
            return
        e = int(end["seq"])
        self._complete(e, time.time())
        self._admissions = {k: v for k, v in self._admissions.items() if k > e}
        if self.redis is not None and self.opts.trim:
            self.redis.trim(self.redis.ids_at(e))  # only what Spark has committed
        if self.planner is not None:
            self.planner.forget(e if self.accounts.inflight is None else min(e, self.accounts.inflight.start))

    def _complete(self, end: int, now: float) -> None:
        """Account the batch ending at ``end`` if it is the one in flight, then snapshot the policies."""
        rows_before = self.accounts._rows_done  # rows of completed batches so far (the accountant's tally)
        planned = self.accounts.complete(end, now)
        if planned is not None:
            self.policy_state.save(end, **self._policies())
            if self.sched is not None:
                self.sched.report_done(end, self.accounts._rows_done - rows_before, now - planned.admitted_at)

    def stop(self) -> None:
        if self._started:
            self.connector.stop()
            if self.sched is not None:
                self.sched.close()
            self.lock.release()


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
        try:
            return AdaptstreamStreamReader(schema, dict(self.options))
        except AdaptstreamError as e:
            return RefusedStreamReader(e)


class RefusedStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Stands in for a reader whose options were refused, and raises that error on Spark's first call.

    PySpark 4.3's source runner cannot report an exception raised while it builds the reader (its cleanup then
    reads an unbound variable, and the query fails with an UnboundLocalError on top of ours); an error raised
    by a reader method reaches ``query.exception()`` as it is."""

    def __init__(self, error: AdaptstreamError) -> None:
        self.error = error

    def _refuse(self, *_args, **_kwargs):
        raise self.error

    initialOffset = latestOffset = partitions = getDefaultReadLimit = reportLatestOffset = _refuse
    prepareForTriggerAvailableNow = commit = read = _refuse

    def stop(self) -> None:
        return None


def register(spark) -> None:
    """Make ``format("adaptstream")`` available in this SparkSession."""
    spark.dataSource.register(AdaptstreamDataSource)
