"""Options of ``spark.readStream.format("adaptstream")``, read once into a frozen config (pure Python).

Every option is checked here, when the source is built (the CLI calls this before Spark starts; in a PySpark
program Spark builds the source when the query starts, before any data is read): names are resolved from the
registries (the error lists the valid choices) and numbers are checked against their range. The options common to
every source are the fields of :class:`SourceOptions`; each connector's own are the fields of its options class
(connectors/), held in ``SourceOptions.conn``. Both come from field metadata (adaptstream/config.py), so the set
of valid names, the coercion and the README's option table have one source.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from adaptstream.config import from_options, option, option_fields
from adaptstream.connectors import CONNECTORS
from adaptstream.connectors.base import ConnectorOptions
from adaptstream.errors import ConfigError
from adaptstream.timeparse import parse_duration

READ_ON = ("executors", "driver")
FILE_FORMATS = ("csv", "json", "jsonl", "parquet")
DEFAULT_MAX_BYTES = 256 * 1024 * 1024  # a backlog never becomes one unbounded batch (maxBytesPerTrigger)
DEFAULT_PARTITION_BYTES = 64 * 1024 * 1024  # one Spark task parses at most about this much
ALIASES = {"input": "path", "maxdatasetsperbatch": "maxfilespertrigger"}  # the CLI's names; older names


def _check_names(o: SourceOptions) -> None:
    """Resolve every policy name and parameter now, so a typo fails before Spark starts, listing the choices."""
    from adaptstream.config import parse_kv

    o.admission_policy()  # names, parameters and their ranges (the policy's own checks)
    params = parse_kv(o.partitioner_params, "option partitionerParams")
    if o.partitioner != "time" or params:  # the registry imports numba's kernels: 0.25 s a query start pays otherwise
        from adaptstream.partitioning import make_config

        make_config(o.partitioner, **params)


def known_options(connector: Any = None) -> set[str]:
    """Every option name (lower case) a source accepts: the common ones, each registered connector's own and those
    of ``connector`` (a connector class loaded by ``module:Class``)."""
    names = set(option_fields(SourceOptions)) | set(ALIASES) | {"margin"}
    for conn in [CONNECTORS.get(n) for n in CONNECTORS] + ([connector] if connector is not None else []):
        names |= set(option_fields(conn.options_class))
    return names


def option_table(connector: str | None = None) -> list[tuple[str, str, str, str, str]]:
    """(option, connector or 'every source', kind, default, help) of every option, from the field metadata."""
    from adaptstream.config import describe

    rows = [(n, "every source", k, d, h) for n, k, d, h in describe([SourceOptions])]
    rows.insert(rows.index(next(r for r in rows if r[0] == "trigger")) + 1, MARGIN_ROW)
    names = [CONNECTORS.get(connector).name] if connector else list(CONNECTORS)
    for name in names:
        rows += [(n, name, k, d, h) for n, k, d, h in describe([CONNECTORS.get(name).options_class])]
    return rows


MARGIN_ROW = ("margin", "every source", "duration", "auto", "LMStream's safety margin: auto, or seconds")


def _owner(name: str) -> tuple[str, str] | None:
    """(connector, the option's Spark spelling) of a connector's own option, else None."""
    for conn in CONNECTORS:
        fields = option_fields(CONNECTORS.get(conn).options_class)
        if name in fields:
            return conn, fields[name].metadata["spark"]
    return None


@dataclass(frozen=True)
class SourceOptions:
    connector: str = option("connector", "files", "name", help="where data comes from (default: from the path)")
    path: str | None = option("path", None, help="the input directory, or a URL a connector claims")
    file_format: str = option("fileFormat", "csv", "lower", choices=FILE_FORMATS, help="csv, json (lines) or parquet")
    header: bool = option("header", False, "bool", help="CSV: the first line of a file names the columns")
    delimiter: str = option("delimiter", ",", help="CSV field separator")
    null_value: str = option("nullValue", "", help="the CSV token read as null")
    multiline: bool = option("multiLine", True, "bool", help="CSV: newlines inside quoted values")
    admission: str = option("admission", "asap", "name", help="when a micro-batch is cut (asap, fixed, lmstream)")
    admission_params: str = option(
        "admissionParams", "", help="name=value;name=value of the admission policy's config (e.g. history=8)"
    )
    slide: float = option("slide", 10.0, "duration", help="the query's window slide (latency target of LMStream)")
    trigger: float = option("trigger", 10.0, "duration", help="the fixed policy's interval")
    margin: float | str = "auto"  # seconds, or auto (read by parse: a duration or the word auto)
    poll_interval: float = option("pollInterval", 0.02, "duration", help="how often the source looks for input")
    metrics_path: str | None = option("metricsPath", None, help="where batch metrics and the quarantine go")
    state_path: str | None = option("statePath", None, help="the source's manifest and policy state")
    drain: bool = option("drain", False, "bool", help="finite input: end the query once all input is read")
    sentinel_path: str | None = option("sentinelPath", None, help="end-of-input rows appended when input ends")
    partitioner: str = option("partitioner", "time", "name", help="which rows go to which Spark task")
    num_blocks: int = option("numBlocks", 2, "int", low=1, help="Spark input partitions per micro-batch")
    blocks_file: str | None = option("blocksFile", None, help="a file whose map_tasks overrides numBlocks")
    partition_key: tuple[str, ...] = option("partitionKey", (), "list", help="key column(s) of the partitioner")
    partition_window: float = option("partitionWindow", 0.0, "duration", help="partitioner state span (0: a batch)")
    partitioner_params: str = option("partitionerParams", "", help="name=value;name=value of the partitioner")
    max_files: int = option("maxFilesPerTrigger", 0, "int", low=0, help="datasets per batch at most (0: no cap)")
    max_bytes: int = option("maxBytesPerTrigger", DEFAULT_MAX_BYTES, "bytes", help="bytes per batch at most (0: none)")
    max_rows: int = option("maxRowsPerTrigger", 0, "int", low=0, help="rows per batch at most (0: no cap)")
    max_partition_bytes: int = option(
        "maxPartitionBytes", DEFAULT_PARTITION_BYTES, "bytes", help="bytes one Spark task reads at most"
    )
    read_on: str = option("readOn", "executors", "lower", choices=READ_ON, help="where rows are parsed")
    controller: str | None = option("controller", None, help="host:port of the application's controller")
    controller_query: str | None = option("controllerQuery", None, help="the name the query registers under")
    controller_secret: str | None = option("controllerSecret", None, secret=True, help="the controller's secret")
    controller_timeout: float = option(
        "controllerTimeout", 2.0, "duration", low=0.05, help="wait for a controller reply before running unscheduled"
    )
    window_period: float = option(
        "windowPeriod", 0.0, "duration", low=0.0, help="window slide for Klink's SWM (default: slide, when given)"
    )
    watermark_delay: float = option("watermarkDelay", 0.0, "duration", low=0.0, help="the query's watermark delay")
    conn: ConnectorOptions = field(default_factory=ConnectorOptions)  # the connector's own options

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> SourceOptions:
        opts = {str(k).lower(): str(v) for k, v in options.items()}
        for alias, name in ALIASES.items():
            if alias in opts:
                opts.setdefault(name, opts[alias])
        if "slide" in opts:  # the query's slide, given: its window slide for the scheduler too
            opts.setdefault("windowperiod", opts["slide"])
        path = opts.get("path", "")
        claimed = [c for c in CONNECTORS if CONNECTORS.get(c).claims(path)]
        opts.setdefault("connector", claimed[0] if claimed else "files")
        connector_cls = CONNECTORS.get(opts["connector"])
        unknown = sorted(set(opts) - known_options(connector_cls) - {"schema"})
        if unknown:
            valid = ", ".join(sorted(known_options(connector_cls)))
            msg = f"unknown adaptstream option(s): {', '.join(unknown)}; valid options: {valid}"
            raise ConfigError(msg)
        owners = [o for o in map(_owner, sorted(opts)) if o is not None and o[0] != connector_cls.name]
        if owners:
            which = ", ".join(f"{spark} ({conn} connector)" for conn, spark in owners)
            msg = f"option(s) {which} do not apply to the {connector_cls.name} connector of this source"
            raise ConfigError(msg)
        margin: float | str = opts.get("margin", "auto")
        o = from_options(cls, opts, margin="auto" if margin == "auto" else parse_duration(margin))
        fmt = "json" if o.file_format == "jsonl" else o.file_format
        conn = from_options(connector_cls.options_class, opts, path=o.path)
        name = opts["connector"] if ":" in opts["connector"] else connector_cls.name  # module:Class stays as given
        o = dataclasses.replace(o, connector=name, file_format=fmt, conn=conn)
        o.validate()
        connector_cls.check(conn, o)
        return o

    def admission_policy(self) -> Any:
        """A fresh admission policy as these options configure it (``admission`` and ``admissionParams``)."""
        from adaptstream.admission import build_admission

        shared = {
            "slide": self.slide,
            "trigger": self.trigger,
            "margin": self.margin,
            "poll_interval": self.poll_interval,
        }
        return build_admission(self.admission, self.admission_params, **shared)

    def file_format_spec(self):
        from adaptstream.connectors.parsing import FileFormat

        return FileFormat(self.file_format, self.header, self.delimiter, self.null_value, self.multiline)

    def validate(self) -> None:
        if self.controller:
            from adaptstream.control.ipc import parse_address

            parse_address(self.controller)
        if self.sentinel_path and not os.path.exists(self.sentinel_path):
            msg = f"sentinelPath {self.sentinel_path!r} does not exist"
            raise ConfigError(msg)
        self.file_format_spec()  # checks the delimiter
        _check_names(self)

    def state_dir(self, query_id: str | None = None) -> str:
        """Where the manifest lives: statePath, else <metricsPath>/source, else a directory of this query's own
        under <path>/_adaptstream/ (its id travels in the offsets Spark checkpoints, so a restart finds it again
        and two queries on one directory never share state). ``query_id`` None: the layout before query ids."""
        if self.state_path:
            return self.state_path
        if self.metrics_path:
            return os.path.join(self.metrics_path, "source")
        base = os.path.join(str(self.path), "_adaptstream")
        return os.path.join(base, query_id) if query_id else base

    @property
    def per_query_state(self) -> bool:
        """True when the state directory is chosen per query (neither statePath nor metricsPath given)."""
        return not (self.state_path or self.metrics_path)

    @property
    def input_dir(self) -> str:
        if self.path:
            return self.path
        return os.path.join(self.state_dir(), "input")

    def connector_class(self) -> Any:
        return CONNECTORS.get(self.connector)
