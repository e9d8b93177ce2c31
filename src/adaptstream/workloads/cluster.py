"""Google cluster-trace ``task_events`` (2011 schema): replay of the shared samples, then an empirical model.

The first rows are the two shared 10,000-row samples (``task_event_1_10000.csv`` then
``task_event_2_10000.csv`` from CppStream, VLDB'17 authors, MIT) replayed in file order. Dataset ``t`` with
``n`` rows takes the next ``n`` rows of the replay; their trace timestamps are replaced by the run's clock:
row ``i`` of dataset ``t`` gets ``timestamp = t * 1e6 + floor(i * 1e6 / n)`` microseconds, so every row of
dataset ``t`` has event time in ``[t, t+1)`` seconds and the trace's relative order is kept.

After the samples are exhausted rows come from an empirical model fitted to both samples (named *fitted*
rows, simulated data): job-level fields (job ID, user, scheduling class, priority, resource requests,
missing-info flag, machine-constraint flag) are copied from a uniformly drawn sample row, so a job is drawn
with its empirical frequency and keeps its own class and request sizes; the event type is drawn from the
empirical event-type distribution; the task index uniformly from the job's observed index range; the machine
ID is null with the empirical null share of that event type and otherwise drawn from the observed machine
IDs.

Missing fields in the real sample (109 rows of sample 1 have no CPU/memory/disk request and missing-info
flag 2; machine IDs are often empty) are kept as null. SQL's SUM/AVG skip nulls, identically in the
streaming query and the batch oracle; a group whose values are all null yields null.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv

from adaptstream.workloads.base import GENERATORS, DatasetGenerator
from adaptstream.workloads.data import cppstream_dir, cppstream_file

COLUMNS: tuple[tuple[str, pa.DataType, str, bool], ...] = (
    ("timestamp", pa.int64(), "BIGINT", False),  # microseconds on the run's clock
    ("missing_info", pa.int32(), "INT", True),
    ("job_id", pa.int64(), "BIGINT", False),
    ("task_index", pa.int32(), "INT", False),
    ("machine_id", pa.int64(), "BIGINT", True),
    ("event_type", pa.int32(), "INT", False),
    ("user_name", pa.string(), "STRING", True),
    ("scheduling_class", pa.int32(), "INT", True),
    ("priority", pa.int32(), "INT", True),
    ("cpu_request", pa.float64(), "DOUBLE", True),
    ("memory_request", pa.float64(), "DOUBLE", True),
    ("disk_space_request", pa.float64(), "DOUBLE", True),
    ("different_machines_restriction", pa.int32(), "INT", True),
)
NAMES = tuple(c[0] for c in COLUMNS)
ARROW_SCHEMA = pa.schema([pa.field(n, t, nullable=nullable) for n, t, _, nullable in COLUMNS])
SPARK_DDL = ", ".join(f"{n} {ddl}" for n, _, ddl, _ in COLUMNS)
SAMPLE_FILES = ("task_event_1_10000.csv", "task_event_2_10000.csv")
SENTINEL_EVENT_TYPE = -1
_JOB_FIELDS = (
    "missing_info",
    "job_id",
    "user_name",
    "scheduling_class",
    "priority",
    "cpu_request",
    "memory_request",
    "disk_space_request",
    "different_machines_restriction",
)


def default_data_dir() -> Path:
    """The CppStream samples' folder (see `workloads/data.py`)."""
    return cppstream_dir()


@lru_cache(maxsize=4)
def load_sample(data_dir: str) -> pa.Table:
    """Both samples, in file order, typed as :data:`ARROW_SCHEMA` (trace timestamps kept, in microseconds)."""
    tables = []
    for name in SAMPLE_FILES:
        path = cppstream_file(name, data_dir)
        opts = pacsv.ReadOptions(column_names=list(NAMES))
        conv = pacsv.ConvertOptions(column_types={n: t for n, t, _, _ in COLUMNS}, strings_can_be_null=True)
        tables.append(pacsv.read_csv(path, read_options=opts, convert_options=conv).cast(ARROW_SCHEMA))
    return pa.concat_tables(tables).combine_chunks()


@dataclass(frozen=True)
class TaskEventsGeneratorConfig:
    seed: int = 0
    data_dir: str | None = None  # None = default_data_dir()
    replay: bool = True  # False: fitted rows from second 0 on
    generator_cls: ClassVar[type[DatasetGenerator]]

    def build(self) -> TaskEventsGenerator:
        return TaskEventsGenerator(self)


class _Fitted:
    """Empirical model of the sample used once the replay is exhausted (see module docstring)."""

    def __init__(self, sample: pa.Table) -> None:
        cols = {n: sample.column(n) for n in NAMES}
        self.job_rows = {f: cols[f].combine_chunks() for f in _JOB_FIELDS}
        self.n = sample.num_rows
        etypes = cols["event_type"].to_numpy()
        self.event_types, counts = np.unique(etypes, return_counts=True)
        self.event_p = counts / counts.sum()
        machine_null = pc.is_null(cols["machine_id"]).to_numpy(zero_copy_only=False)
        self.machine_null_share = np.array([machine_null[etypes == e].mean() for e in self.event_types])
        self.machines = pc.drop_null(cols["machine_id"]).to_numpy()
        jobs = cols["job_id"].to_numpy()
        tidx = cols["task_index"].to_numpy()
        self.job_of_row = jobs
        uniq, inv = np.unique(jobs, return_inverse=True)
        self.max_task = np.zeros(len(uniq), dtype=np.int64)
        np.maximum.at(self.max_task, inv, tidx)
        self.row_job_max_task = self.max_task[inv]

    def rows(self, k: int, rng: np.random.Generator) -> dict[str, Any]:
        src = rng.integers(0, self.n, size=k)
        out: dict[str, Any] = {f: self.job_rows[f].take(pa.array(src)) for f in _JOB_FIELDS}
        e_idx = rng.choice(len(self.event_types), size=k, p=self.event_p)
        out["event_type"] = pa.array(self.event_types[e_idx], type=pa.int32())
        out["task_index"] = pa.array(
            np.floor(rng.random(k) * (self.row_job_max_task[src] + 1)).astype(np.int32), type=pa.int32()
        )
        null = rng.random(k) < self.machine_null_share[e_idx]
        machine = self.machines[rng.integers(0, len(self.machines), size=k)]
        out["machine_id"] = pa.array(machine, type=pa.int64(), mask=null)
        return out


class TaskEventsGenerator(DatasetGenerator):
    """Replays the shared task_events samples on the run's clock, then continues with fitted rows."""

    name = "task_events"
    arrow_schema = ARROW_SCHEMA
    spark_schema_ddl = SPARK_DDL

    def __init__(self, config: TaskEventsGeneratorConfig) -> None:
        super().__init__(config.seed)
        self.config = config
        data_dir = str(config.data_dir or default_data_dir())
        self.sample = load_sample(data_dir)
        self.replay_rows = self.sample.num_rows if config.replay else 0
        self.fitted = _Fitted(self.sample)
        self.cursor = 0  # rows emitted so far

    def _state(self) -> dict[str, Any]:
        return {"cursor": self.cursor}

    def _load_state(self, state: dict[str, Any]) -> None:
        self.cursor = int(state["cursor"])

    def _step(self, second: int, n_rows: int, materialise: bool) -> pa.Table | None:
        start = self.cursor
        self.cursor += n_rows
        if not materialise:
            return None
        n_replay = max(0, min(self.replay_rows - start, n_rows))
        parts = []
        if n_replay:
            parts.append(self.sample.slice(start, n_replay))
        n_fit = n_rows - n_replay
        if n_fit:
            cols = self.fitted.rows(n_fit, self.rng(second))
            parts.append(
                pa.table({n: cols.get(n, pa.nulls(n_fit, type=t)) for n, t, _, _ in COLUMNS}, schema=ARROW_SCHEMA)
            )
        table = pa.concat_tables(parts) if parts else ARROW_SCHEMA.empty_table()
        offsets = np.floor(np.arange(n_rows) * 1_000_000 / max(n_rows, 1)).astype(np.int64)
        ts = pa.array(second * 1_000_000 + offsets, type=pa.int64())
        return table.set_column(0, ARROW_SCHEMA.field(0), ts).combine_chunks()

    @classmethod
    def sentinel_table(cls, time_s: int) -> pa.Table:
        row: dict[str, list[Any]] = {n: [None] for n in NAMES}
        row.update(timestamp=[int(time_s) * 1_000_000], job_id=[-1], task_index=[-1], event_type=[SENTINEL_EVENT_TYPE])
        return pa.table({n: pa.array(row[n], type=t) for n, t, _, _ in COLUMNS}, schema=ARROW_SCHEMA)


TaskEventsGeneratorConfig.generator_cls = TaskEventsGenerator
GENERATORS.register("task_events")(TaskEventsGeneratorConfig)
