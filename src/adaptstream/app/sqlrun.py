"""``adaptstream run --sql "SELECT ... FROM input" --schema "..." --input DIR``: one's own queries over one's own
files from the command line, no PySpark to write.

Each ``--sql`` reads the input directory through its own ``format("adaptstream")`` source (its own state), seen by
the query as the table ``input``; several run concurrently in one application under the tuner (``--scheduler``,
``--admission``). A query without aggregation appends its rows to ``RUN/<name>/output`` (Parquet); an aggregation
without a watermark keeps its complete result there (each batch replaces it). The run drains the input present,
then stops, and writes ``RUN/tuner.json`` and ``RUN/sql.json``.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from typing import Any

from adaptstream.errors import ConfigError

TABLE = "input"
DRAIN_TIMEOUT = 600.0  # seconds a run waits for a holding admission policy to release the last datasets


@dataclass(frozen=True)
class SqlSpec:
    sqls: tuple[str, ...]
    schema: str | None
    input_dir: str
    file_format: str = "csv"
    header: bool = False
    scheduler: str = "default"
    scheduler_params: str = ""
    admission: str | None = None
    admission_params: str = ""

    def check(self) -> None:
        from adaptstream.tuner import TunerConfig

        if not os.path.isdir(self.input_dir):
            msg = f"--input {self.input_dir!r} is not a directory (--sql reads the files of one directory)"
            raise ConfigError(msg)
        if self.schema is None and self.file_format != "parquet":
            msg = "--sql needs --schema 'col TYPE, ...' (the columns of the input files; Parquet files carry theirs)"
            raise ConfigError(msg)
        if any(not s.strip() for s in self.sqls):
            msg = "--sql must not be empty"
            raise ConfigError(msg)
        TunerConfig(
            self.scheduler, self.scheduler_params, admission=self.admission, admission_params=self.admission_params
        ).check("local")


def _source(spark: Any, spec: SqlSpec, state: str) -> Any:
    reader = (
        spark.readStream.format("adaptstream")
        .option("path", spec.input_dir)
        .option("fileFormat", spec.file_format)
        .option("header", str(spec.header).lower())
        .option("fileStableSeconds", "0")
        .option("metricsPath", state)
    )
    return (reader.schema(spec.schema) if spec.schema else reader).load()


def _query(spark: Any, spec: SqlSpec, k: int, sql: str, run_dir: str) -> Any:
    """The k-th query's result DataFrame; a SQL error is one clear line naming the query."""
    from pyspark.errors import PySparkException

    _source(spark, spec, os.path.join(run_dir, f"q{k}", "metrics")).createOrReplaceTempView(TABLE)
    try:
        return spark.sql(sql)
    except PySparkException as e:
        first = next((ln.strip() for ln in str(e).splitlines() if ln.strip()), type(e).__name__)
        msg = f"--sql {k} ({sql!r}): {first}"
        raise ConfigError(msg) from None


def _start(df: Any, name: str, out: str, ck: str) -> tuple[Any, str]:
    """Append where Spark allows it, else the complete result (an aggregation without a watermark)."""
    from pyspark.errors import AnalysisException

    try:
        w = df.writeStream.queryName(name).format("parquet").option("path", out).option("checkpointLocation", ck)
        return w.start(), "append"
    except AnalysisException:

        def replace(batch: Any, _id: int) -> None:
            batch.write.mode("overwrite").parquet(out)

        w = df.writeStream.queryName(name).outputMode("complete").foreachBatch(replace)
        return w.option("checkpointLocation", ck).start(), "complete"


def _drain(name: str, q: Any, timeout: float = DRAIN_TIMEOUT) -> None:
    """Until every dataset the source recorded is committed (spark/drain.py: an admission policy that holds buffered
    data lets Spark's own ``processAllAvailable`` return first)."""
    from pyspark.errors import StreamingQueryException

    from adaptstream.errors import query_error
    from adaptstream.spark.drain import process_all_available

    try:
        process_all_available(q, timeout=timeout)
    except StreamingQueryException as e:
        err = query_error(str(e))
        raise type(err)(f"query {name}: {err}") from None


def run_sql(spark: Any, spec: SqlSpec, run_dir: str) -> dict[str, Any]:
    """Run every query to the end of the input present; the per-query summary (also RUN/sql.json)."""
    from adaptstream.tuner import tune

    queries: list[tuple[str, str, Any, str]] = []
    with tune(
        spark,
        scheduler=spec.scheduler,
        scheduler_params=spec.scheduler_params,
        admission=spec.admission,
        admission_params=spec.admission_params,
        metrics_path=run_dir,
    ) as tuner:
        try:
            for k, sql in enumerate(spec.sqls, start=1):
                name = f"q{k}"
                out = os.path.join(run_dir, name, "output")
                df = _query(spark, spec, k, sql, run_dir)
                q, mode = _start(df, name, out, os.path.join(run_dir, name, "checkpoint"))
                queries.append((name, sql, q, mode))
            for name, _, q, _ in queries:
                _drain(name, q)
        finally:
            for *_, q, _ in queries:
                q.stop()
        status = tuner.status()
    report = {"spec": asdict(spec), "queries": {}}
    for name, sql, _, mode in queries:
        out = os.path.join(run_dir, name, "output")
        rows = spark.read.parquet(out).count() if os.path.isdir(out) else 0
        seen = status["queries"].get(name, {})
        report["queries"][name] = {"sql": sql, "mode": mode, "output": out, "output_rows": rows, **seen}
    with open(os.path.join(run_dir, "sql.json"), "w") as f:
        json.dump(report, f, indent=2, default=str)
    return report
