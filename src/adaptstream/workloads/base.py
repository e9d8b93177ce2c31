"""Dataset generators (one dataset = the rows of one second) and the windowed workloads that query them.

A generator is deterministic: its output for second ``t`` depends only on the seed and on the row counts
asked for seconds ``0..t``. Its evolving state (vehicles on the road, position in the trace replay) is
therefore either rebuilt by :meth:`DatasetGenerator.fast_forward` from the earlier row counts, or saved and
restored with :meth:`DatasetGenerator.state_dict` / :meth:`DatasetGenerator.load_state_dict`. Random draws
for second ``t`` come from ``numpy.random.default_rng([seed, t])``, so no random-number state has to be
carried between seconds.
"""

from __future__ import annotations

import math
import uuid
from abc import ABC, abstractmethod
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from adaptstream.errors import WorkloadError
from adaptstream.registry import Registry

if TYPE_CHECKING:  # pragma: no cover - Spark is imported lazily
    from pyspark.sql import DataFrame


class DatasetGenerator(ABC):
    """Deterministic, resumable source of one dataset (a pyarrow Table) per second of the run."""

    name: str
    arrow_schema: pa.Schema
    spark_schema_ddl: str

    def __init__(self, seed: int = 0) -> None:
        self.seed = int(seed)
        self.next_second = 0

    # -- public API ----------------------------------------------------------------------------------------
    def generate(self, second: int, n_rows: int) -> pa.Table:
        """Rows of dataset ``second`` (exactly ``n_rows``). Seconds must be asked in order 0, 1, 2, ..."""
        self._check_second(second, n_rows)
        table = self._step(second, int(n_rows), materialise=True)
        self.next_second = second + 1
        if table is None or table.num_rows != n_rows:  # an internal bug, never an expected outcome
            msg = f"{self.name}: produced {0 if table is None else table.num_rows} rows, asked {n_rows}"
            raise WorkloadError(msg)
        return table

    def fast_forward(self, row_counts: Iterable[int]) -> None:
        """Advance through the next seconds with these row counts, building no tables (to resume)."""
        for n in row_counts:
            self._check_second(self.next_second, n)
            self._step(self.next_second, int(n), materialise=False)
            self.next_second += 1

    def state_dict(self) -> dict[str, Any]:
        """A picklable snapshot of the state after the last generated second."""
        return {"name": self.name, "seed": self.seed, "next_second": self.next_second, **self._state()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if state.get("name") != self.name or int(state.get("seed", -1)) != self.seed:
            msg = (
                f"state of {state.get('name')!r} seed {state.get('seed')} cannot be loaded into "
                f"{self.name!r} seed {self.seed}"
            )
            raise WorkloadError(msg)
        self.next_second = int(state["next_second"])
        self._load_state(state)

    def csv_header(self) -> bool:
        """Whether dataset files of this generator carry a CSV header line."""
        return False

    def rng(self, second: int) -> np.random.Generator:
        return np.random.default_rng([self.seed, second])

    # -- for subclasses ------------------------------------------------------------------------------------
    @abstractmethod
    def _step(self, second: int, n_rows: int, materialise: bool) -> pa.Table | None:
        """Advance the state by one second; return the table only when ``materialise`` is true."""

    @abstractmethod
    def _state(self) -> dict[str, Any]: ...

    @abstractmethod
    def _load_state(self, state: dict[str, Any]) -> None: ...

    @classmethod
    @abstractmethod
    def sentinel_table(cls, time_s: int) -> pa.Table:
        """One end-of-stream row with event time ``time_s`` that every query recognises and drops."""

    def _check_second(self, second: int, n_rows: int) -> None:
        if n_rows < 0:
            msg = f"{self.name}: n_rows must be >= 0, got {n_rows}"
            raise WorkloadError(msg)
        if second != self.next_second:
            msg = (
                f"{self.name}: asked for second {second} but the state is at second {self.next_second}; "
                "a generator resumes only in order: call fast_forward(row counts of the earlier seconds) "
                "or load_state_dict(saved state) first"
            )
            raise WorkloadError(msg)


GENERATORS: Registry[Any] = Registry("dataset generator")
"""name -> frozen GeneratorConfig class (``GENERATORS.get(name)(seed=...).build()``); its ``.generator_cls``
is the generator class it builds."""


def build_generator(name: str, seed: int = 0, **options: Any) -> DatasetGenerator:
    return GENERATORS.get(name)(seed=seed, **options).build()


# ------------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Workload(ABC):
    """One windowed continuous query of LMStream's Table III over a generator's stream.

    The streaming transformation runs in output mode *append*; the batch oracle is independent Spark SQL.
    """

    name: str
    generator: str
    window_s: float
    slide_s: float
    key_columns: tuple[str, ...]
    event_time_column: str
    watermark_delay_s: float = 2.0
    description: str = ""

    @property
    def tumbling(self) -> bool:
        return self.slide_s in (0.0, self.window_s)

    @property
    def lmstream_slide(self) -> float:
        """LMStream's SlideTime: the slide of a sliding window, 0 for a tumbling one (Sec. IV-B, Alg. 1)."""
        return 0.0 if self.tumbling else float(self.slide_s)

    @property
    def effective_slide_s(self) -> float:
        return float(self.window_s) if self.tumbling else float(self.slide_s)

    def generator_class(self) -> type[DatasetGenerator]:
        return GENERATORS.get(self.generator).generator_cls

    def sentinel(self, after_second: int) -> pa.Table:
        """End-of-stream rows placed late enough that the watermark closes every window holding data."""
        ahead = math.ceil(self.window_s + self.effective_slide_s + self.watermark_delay_s) + 1
        return self.generator_class().sentinel_table(int(after_second) + ahead)

    @abstractmethod
    def stream_query(self, df: DataFrame) -> DataFrame:
        """Streaming transformation of the raw stream ``df`` (the generator's columns), for append mode."""

    @abstractmethod
    def batch_sql(self, view: str) -> str:
        """The oracle as batch Spark SQL over the raw rows registered as temporary view ``view``."""

    def batch_query(self, df: DataFrame) -> DataFrame:
        """The oracle: the result of :meth:`stream_query` over the same rows, as a batch SQL query."""
        view = f"adaptstream_{self.name.lower()}_{uuid.uuid4().hex[:10]}"
        df.createOrReplaceTempView(view)
        return df.sparkSession.sql(self.batch_sql(view))

    def finalize_batch(self, df: DataFrame) -> DataFrame:
        """Per-micro-batch post-step applied inside foreachBatch; identity by default."""
        return df

    def output_columns(self) -> tuple[str, ...]:
        return ()

    def event_seconds(self) -> float:
        """Seconds per unit of the raw ``event_time_column`` (seconds since the run's start in those units)."""
        return 1.0 / float(getattr(self, "time_unit_per_s", 1))


WORKLOADS: Registry[Workload] = Registry("workload")
