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

import hashlib
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

from adaptstream.admission import PendingDataset
from adaptstream.config import parse_kv
from adaptstream.connectors.base import DatasetRef, Manifest, StateLock
from adaptstream.errors import AdaptstreamError, ConfigError, ConnectorError
from adaptstream.metrics.recorder import MetricsRecorder
from adaptstream.policy import PolicyStateFile
from adaptstream.spark.accounting import Accountant, Planned, Quarantine
from adaptstream.spark.options import SourceOptions
from adaptstream.spark.planner import DriverPlanner, read_block_count
from adaptstream.spark.read import TaskPartition, read_partition

FORMAT = "adaptstream"


def arrow_schema(schema: StructType) -> pa.Schema:
    from pyspark.sql.pandas.types import to_arrow_schema

    return to_arrow_schema(schema, timezone="UTC")


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
        self.connector = self.opts.connector_class().from_options(
            self.opts, self.manifest, self.state_dir, self._file_changed
        )
        policy = self.opts.admission_policy()
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
        if offset is not None:
            self.connector.check_offset(offset, self.state_dir)  # a restart: the checkpoint must match the state

    def _controller_client(self):
        """The application's scheduling controller (control/), when the ``controller`` option names one."""
        if not self.opts.controller:
            return None
        from adaptstream.control.client import ControllerClient

        name = self.opts.controller_query or self._query_id or state_name(self.state_dir)
        streams = {"main": (self.opts.window_period, self.opts.watermark_delay)} if self.opts.window_period else {}
        log_path = os.path.join(self.opts.metrics_path or self.state_dir, "controller.log")
        return ControllerClient(
            self.opts.controller,
            name,
            streams,
            timeout=self.opts.controller_timeout,
            log_path=log_path,
            secret=self.opts.controller_secret,
        )

    def _event_progress(self, ref: DatasetRef) -> None:
        """Report a new dataset's event-time progress to the controller, when the connector knows it (generated
        input: its newest event's generation time and the network delays of its events); plain files carry none."""
        if self.sched is None or not self.opts.window_period:
            return
        progress = self.connector.event_progress(ref)
        if progress is not None:
            newest, origin, *delays = progress
            self.sched.report_progress("main", ref.seq, ref.arrival, newest, origin, *delays)

    def _check_offset(self, offset: dict | None) -> None:
        if offset is not None:
            self.connector.check_offset(offset, self.state_dir)
        if offset is None or not self.opts.per_query_state:
            return
        if offset.get("query") != self._query_id:
            msg = (
                f"offset {offset} belongs to source state {offset.get('query')!r}, not {self._query_id!r}; "
                "the checkpoint and the source state directory do not match"
            )
            raise ConnectorError(msg)

    def _load(self, ref: DatasetRef):
        return self.connector.load(ref, self.schema, self.fmt)

    def _build_planner(self) -> DriverPlanner | None:
        load = self._load
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
        params = parse_kv(self.opts.partitioner_params, "option partitionerParams")
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
        """The offset Spark checkpoints; ``state`` tells drain.py where the manifest is."""
        extra = {**self.connector.offset_fields(seq), "state": os.path.abspath(self.state_dir)}
        if self.sched is not None:  # the name it is scheduled under: how the tuner links it to the Spark query
            extra = {**extra, "ctl": self.sched.query}
        return {"seq": seq, **extra, "query": self._query_id} if self._query_id else {"seq": seq, **extra}

    # -- Spark's streaming reader API ----------------------------------------------------------------------
    def initialOffset(self) -> dict:
        if self.opts.connector_class().start_on_initial_offset:
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
            if self._available_now:
                self.connector.freeze()  # everything present now, nothing added later: walk to it now
                while not self.connector.caught_up():
                    self._poll_connector()
            self._poll_connector()
            if self._available_now:
                self._target = len(self.manifest)  # everything present now, nothing that arrives later
        self.connector.check_not_lost(s)
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
        marks = {}  # how spark/windowed.py knows a finite input's last batch
        if self._target is not None and end >= self._target:
            marks["availableNowEnd"] = True
        if any(r.sentinel for r in refs):  # drain: the end-of-input entry is always the manifest's last
            marks["inputEnd"] = True
        return {**self._offset(end), **marks}

    def _poll_connector(self) -> None:
        new = self.connector.poll()
        for ref in new:
            self._event_progress(ref)
        if self.planner is not None:
            for ref in new:
                self.planner.parse(ref)  # parse on arrival: keys counted while buffering, little work at the cut

    def _rows(self, ref: DatasetRef) -> int:
        exact = self.connector.exact_rows(ref) if self.planner is None else None
        if exact is not None:
            return exact
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
        self._ensure_started(self._logged_start(start, end))
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
            tasks = self.connector.plan(refs, num_blocks, self.opts.max_partition_bytes, self.parts_dir)
            parts = [TaskPartition(k, t) for k, t in enumerate(tasks)]
            block_rows = None
            blocks = [t.seqs() for t in tasks]
        self.accounts.inflight = Planned(s, e, admitted_at, t0, est, refs, blocks, block_rows, time.time() - t0)
        return parts

    def _logged_start(self, start: dict, end: dict) -> dict:
        """A first batch replayed after a crash (its offsets logged, not committed): Spark asks this new instance for
        its initial offset again, which names a fresh query id, while the batch's end comes from the offsets log.
        Offset 0 holds no position, so the logged query's id wins and the state written before the crash is used."""
        logged = end.get("query")
        if self._started or not logged or int(start["seq"]) != 0 or start.get("query") in (None, logged):
            return start
        return {**start, "query": logged}  # _ensure_started takes the query id from it

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
        self.connector.committed(e)
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
    """Register with :func:`register`, then ``spark.readStream.format("adaptstream")``.

    ``defaults``: options every source of the session takes unless its own say otherwise (the tuner registers a
    subclass carrying its controller and admission defaults; Spark ships the class to the source's process)."""

    defaults: dict[str, str] = {}  # noqa: RUF012 - replaced per subclass, never mutated

    @classmethod
    def name(cls) -> str:
        return FORMAT

    def _options(self) -> dict[str, str]:
        merged = {str(k).lower(): str(v) for k, v in self.defaults.items()}
        merged.update({str(k).lower(): str(v) for k, v in self.options.items()})
        return merged

    def schema(self) -> str | StructType:
        opts = SourceOptions.parse(self._options())
        schema = opts.connector_class().schema(opts)
        if schema is not None:
            return schema
        msg = "adaptstream needs a schema: spark.readStream.format('adaptstream').schema(SCHEMA)"
        raise ConfigError(msg)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        try:
            return AdaptstreamStreamReader(schema, self._options())
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


def state_name(state_dir: str) -> str:
    """A source's name for the scheduler when it has no query id (``statePath`` or ``metricsPath`` given): its
    state directory, which no two running queries share (the directory's own name alone, e.g. ``source`` under
    every ``metricsPath``, made every such query one to the scheduler). Within the controller's name limit."""
    from adaptstream.control.messages import MAX_NAME

    path = os.path.abspath(state_dir.rstrip("/"))
    if len(path) <= MAX_NAME:
        return path
    digest = hashlib.sha1(path.encode()).hexdigest()[:12]
    return f"...{path[-(MAX_NAME - 16) :]}-{digest}"


def register(spark, defaults: dict[str, str] | None = None) -> None:
    """Make ``format("adaptstream")`` available in this SparkSession; ``defaults`` are options every source of the
    session takes unless its own options say otherwise."""
    from adaptstream.spark.drain import install

    install()  # processAllAvailable waits for data the sources hold back
    if not defaults:
        _register_class(spark, AdaptstreamDataSource)
        return
    # A class made here (not importable by name) travels by value, with its defaults, to the source's process.
    tuned = type("TunedAdaptstreamDataSource", (AdaptstreamDataSource,), {"defaults": dict(defaults)})
    tuned.__qualname__ = f"register.<locals>.{tuned.__name__}"
    _register_class(spark, tuned)


#: environment variables Spark's PythonStreamingSourceRunner.init (4.3) puts into the registered data source's
#: envVars map itself
RUNNER_ENV = ("SPARK_LOCAL_DIRS", "SPARK_AUTH_SOCKET_TIMEOUT", "SPARK_BUFFER_SIZE", "SPARK_PYTHON_RUNTIME")


def _register_class(spark, cls: type) -> None:
    """``spark.dataSource.register`` with :data:`RUNNER_ENV` already in the registration's environment.

    Why: Spark shares one java.util.HashMap, the registration's envVars, between every function made from it (the
    source runner of each query and the read function in every task), and each query's source runner adds these
    keys to that map in place when it starts (read from Spark's bytecode). A key added while another thread
    serializes a task that holds the map would corrupt the task: the likely cause, not reproduced, of the
    ``java.io.OptionalDataException`` in ``HashMap.readObject`` seen once in six runs of three queries starting
    together. With the keys present from the start, the runners only replace values, which leaves the map's
    structure, and a concurrent serialization, intact. The values are placeholders: the runner
    and each executor's Python runner set their own before starting a worker."""
    conf = spark.sparkContext.getConf()
    env = spark.sparkContext.environment
    values = {
        "SPARK_LOCAL_DIRS": conf.get("spark.local.dir", "/tmp"),
        "SPARK_AUTH_SOCKET_TIMEOUT": "15",
        "SPARK_BUFFER_SIZE": conf.get("spark.buffer.size", "65536"),
        "SPARK_PYTHON_RUNTIME": "PYTHON_WORKER",
    }
    added = [k for k in RUNNER_ENV if k not in env]
    env.update({k: values[k] for k in added})
    try:
        spark.dataSource.register(cls)
    finally:
        for k in added:  # the application's other Python functions keep their environment
            env.pop(k, None)
