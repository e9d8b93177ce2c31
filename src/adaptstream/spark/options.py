"""Options of ``spark.readStream.format("adaptstream")``, read once into a frozen config (pure Python).

Every option is checked here, when the source is built (the CLI calls this before Spark starts; in a PySpark
program Spark builds the source when the query starts, before any data is read): names are resolved from the
registries (the error lists the valid choices) and numbers are checked against their range."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from adaptstream.errors import ConfigError
from adaptstream.timeparse import parse_duration

CONNECTORS = ("files", "generator", "redis")
_KNOWN = {
    "connector",
    "blocksfile",
    "path",
    "fileformat",
    "header",
    "delimiter",
    "admission",
    "slide",
    "trigger",
    "margin",
    "metricspath",
    "statepath",
    "generator",
    "traffic",
    "rate",
    "duration",
    "seed",
    "jitter",
    "amplitude",
    "period",
    "drain",
    "sentinelpath",
    "startgate",
    "partitioner",
    "numblocks",
    "partitionkey",
    "partitionwindow",
    "partitionerparams",
    "pollinterval",
    "maxdatasetsperbatch",
    "maxfilespertrigger",
    "maxbytespertrigger",
    "maxrowspertrigger",
    "maxpartitionbytes",
    "filestableseconds",
    "ignorepattern",
    "nullvalue",
    "multiline",
    "readon",
    "input",
    "entryformat",
    "rowfield",
    "datasetseconds",
    "maxdatasetentries",
    "startingposition",
    "redistimeout",
    "redisuser",
    "redispassword",
    "trim",
    "controller",
    "controllerquery",
    "controllersecret",
    "windowperiod",
    "watermarkdelay",
}
READ_ON = ("executors", "driver")
DEFAULT_MAX_BYTES = 256 * 1024 * 1024  # a backlog never becomes one unbounded batch (maxBytesPerTrigger)
DEFAULT_PARTITION_BYTES = 64 * 1024 * 1024  # one Spark task parses at most about this much
_SIZE = re.compile(r"^\s*([0-9]+)\s*([kmgt]?)i?b?\s*$", re.IGNORECASE)


def _bool(value: str, name: str) -> bool:
    v = str(value).strip().lower()
    if v in ("true", "1", "yes"):
        return True
    if v in ("false", "0", "no", ""):
        return False
    msg = f"option {name} must be true or false, got {value!r}"
    raise ConfigError(msg)


def _int(value: str, name: str, minimum: int = 0) -> int:
    try:
        n = int(str(value).strip())
    except ValueError:
        msg = f"option {name} must be an integer, got {value!r}"
        raise ConfigError(msg) from None
    if n < minimum:
        msg = f"option {name} must be >= {minimum}, got {n}"
        raise ConfigError(msg)
    return n


def _float(value: str, name: str, low: float, high: float | None = None) -> float:
    try:
        x = float(value)
    except ValueError:
        msg = f"option {name} must be a number, got {value!r}"
        raise ConfigError(msg) from None
    if not (x >= low and (high is None or x <= high)):
        msg = f"option {name} must be in [{low}, {'inf' if high is None else high}], got {value!r}"
        raise ConfigError(msg)
    return x


def _bytes(value: str | None, name: str) -> int:
    """Sizes like '256m', '1g', '65536'; 0 means no cap."""
    if value is None:
        return 0
    m = _SIZE.match(str(value))
    if not m:
        msg = f"option {name} must be a size in bytes such as 65536, 256m or 1g, got {value!r}"
        raise ConfigError(msg)
    return int(m.group(1)) * 1024 ** "_kmgt".index(m.group(2).lower() or "_")


def _regex(value: str | None) -> str | None:
    if value:
        try:
            re.compile(value)
        except re.error as e:
            msg = f"option ignorePattern is not a valid regular expression: {value!r} ({e})"
            raise ConfigError(msg) from None
    return value or None


def _check_names(o: SourceOptions) -> None:
    """Resolve every policy and workload name now, so a typo fails before Spark starts, listing the choices."""
    from adaptstream.admission import ADMISSION
    from adaptstream.connectors.traffic import TRAFFIC
    from adaptstream.partitioning import PARTITIONERS

    ADMISSION.get(o.admission)
    if o.partitioner != "time":
        PARTITIONERS.get(o.partitioner)
    if o.connector == "generator":
        from adaptstream.workloads import GENERATORS

        TRAFFIC.get(o.traffic)
        GENERATORS.get(str(o.generator))
    if o.partitioner_params and any("=" not in kv for kv in o.partitioner_params.split(";") if kv.strip()):
        msg = f"option partitionerParams must look like 'name=value;name=value', got {o.partitioner_params!r}"
        raise ConfigError(msg)


@dataclass(frozen=True)
class SourceOptions:
    connector: str = "files"
    path: str | None = None
    file_format: str = "csv"
    header: bool = False
    delimiter: str = ","
    admission: str = "asap"
    slide: float = 10.0
    trigger: float = 10.0
    margin: float | str = "auto"
    poll_interval: float = 0.02
    metrics_path: str | None = None
    state_path: str | None = None
    generator: str | None = None
    traffic: str = "constant"
    rate: int = 1000
    duration: float | None = None
    seed: int = 0
    jitter: float = 0.25
    amplitude: float = 0.5
    period: float = 60.0
    drain: bool = False
    sentinel_path: str | None = None
    start_gate: str | None = None  # generator: write nothing until this file names the wall time of event time 0
    partitioner: str = "time"
    num_blocks: int = 2
    blocks_file: str | None = None  # a file whose integer overrides num_blocks per batch (Alg. 4's map tasks)
    partition_key: tuple[str, ...] = ()
    partition_window: float = 0.0
    partitioner_params: str = ""
    max_files: int = 0  # maxFilesPerTrigger (alias maxDatasetsPerBatch); 0 = no cap
    max_bytes: int = DEFAULT_MAX_BYTES  # maxBytesPerTrigger; 0 = no cap
    max_rows: int = 0  # maxRowsPerTrigger (rows estimated from bytes before the executors read); 0 = no cap
    max_partition_bytes: int = DEFAULT_PARTITION_BYTES
    file_stable_seconds: float = 0.5
    ignore_pattern: str | None = None
    null_value: str = ""
    multiline: bool = True
    read_on: str = "executors"  # executors | driver (rows parsed beside the driver and shipped in the partitions)
    # Redis Streams (connectors/redis.py)
    entry_format: str = "row"  # row: one field holding a line in fileFormat | fields: one field per column
    row_field: str = "row"
    dataset_seconds: float = 1.0  # entries whose ID ms fall in one such window form one dataset
    max_dataset_entries: int = 20_000  # a dataset piece holds at most this many entries (one task reads >= 1 piece)
    starting_position: str = "earliest"  # earliest | latest, fixed when the query first starts
    redis_timeout: float = 30.0  # how long the query waits for an unreachable server before it fails
    redis_user: str | None = None  # ACL user (else the URL's, else the default user)
    redis_password: str | None = field(default=None, repr=False)  # else the URL's, else ADAPTSTREAM_REDIS_PASSWORD
    trim: bool = False  # XTRIM MINID the entries Spark has committed
    controller: str | None = None  # host:port of the application's scheduling controller (control/)
    controller_query: str | None = None  # the name this query registers under (default: its state id)
    controller_secret: str | None = field(default=None, repr=False)  # what the controller checks (never logged)
    window_period: float = 0.0  # the query's window slide: the SWM period Klink estimates (0: unknown)
    watermark_delay: float = 0.0  # the query's watermark delay (withWatermark), for SWM deadlines

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> SourceOptions:
        opts = {str(k).lower(): str(v) for k, v in options.items()}
        unknown = sorted(set(opts) - _KNOWN - {"schema"})
        if unknown:
            msg = f"unknown adaptstream option(s): {', '.join(unknown)}; valid options: {', '.join(sorted(_KNOWN))}"
            raise ConfigError(msg)
        if "input" in opts:  # the CLI's name for path; a redis:// URL selects the Redis connector
            opts.setdefault("path", opts["input"])
        default_connector = "redis" if str(opts.get("path", "")).startswith(("redis://", "rediss://")) else "files"
        connector = opts.get("connector", default_connector).lower()
        if connector not in CONNECTORS:
            msg = f"unknown connector {connector!r}; valid choices: {', '.join(CONNECTORS)}"
            raise ConfigError(msg)
        fmt = opts.get("fileformat", "csv").lower()
        if fmt not in ("csv", "json", "jsonl"):
            msg = f"unknown fileFormat {fmt!r}; valid choices: csv, json"
            raise ConfigError(msg)
        if "maxdatasetsperbatch" in opts:
            opts.setdefault("maxfilespertrigger", opts["maxdatasetsperbatch"])
        margin: float | str = opts.get("margin", "auto")
        if margin != "auto":
            margin = parse_duration(margin)
        o = cls(
            connector=connector,
            path=opts.get("path"),
            file_format="json" if fmt == "jsonl" else fmt,
            header=_bool(opts.get("header", "false"), "header"),
            delimiter=opts.get("delimiter", ","),
            admission=opts.get("admission", "asap").lower(),
            slide=parse_duration(opts.get("slide", "10 seconds")),
            trigger=parse_duration(opts.get("trigger", "10 seconds")),
            margin=margin,
            poll_interval=parse_duration(opts.get("pollinterval", "20ms")),
            metrics_path=opts.get("metricspath"),
            state_path=opts.get("statepath"),
            generator=opts.get("generator"),
            traffic=opts.get("traffic", "constant").lower(),
            rate=_int(opts.get("rate", "1000"), "rate"),
            duration=parse_duration(opts["duration"]) if "duration" in opts else None,
            seed=_int(opts.get("seed", "0"), "seed"),
            jitter=_float(opts.get("jitter", "0.25"), "jitter", 0.0),
            amplitude=_float(opts.get("amplitude", "0.5"), "amplitude", 0.0, 1.0),
            period=parse_duration(opts.get("period", "60")),
            drain=_bool(opts.get("drain", "false"), "drain"),
            sentinel_path=opts.get("sentinelpath"),
            start_gate=opts.get("startgate") or None,
            partitioner=opts.get("partitioner", "time").lower(),
            num_blocks=_int(opts.get("numblocks", "2"), "numBlocks", minimum=1),
            blocks_file=opts.get("blocksfile") or None,
            partition_key=tuple(c.strip() for c in opts.get("partitionkey", "").split(",") if c.strip()),
            partition_window=parse_duration(opts.get("partitionwindow", "0")),
            partitioner_params=opts.get("partitionerparams", ""),
            max_files=_int(opts.get("maxfilespertrigger", "0"), "maxFilesPerTrigger"),
            max_bytes=_bytes(opts.get("maxbytespertrigger", str(DEFAULT_MAX_BYTES)), "maxBytesPerTrigger"),
            max_rows=_int(opts.get("maxrowspertrigger", "0"), "maxRowsPerTrigger"),
            max_partition_bytes=_bytes(
                opts.get("maxpartitionbytes", str(DEFAULT_PARTITION_BYTES)), "maxPartitionBytes"
            ),
            file_stable_seconds=parse_duration(opts.get("filestableseconds", "0.5")),
            ignore_pattern=_regex(opts.get("ignorepattern")),
            null_value=opts.get("nullvalue", ""),
            multiline=_bool(opts.get("multiline", "true"), "multiLine"),
            read_on=opts.get("readon", "executors").lower(),
            entry_format=opts.get("entryformat", "row").lower(),
            row_field=opts.get("rowfield", "row"),
            dataset_seconds=_float(opts.get("datasetseconds", "1"), "datasetSeconds", 0.001),
            max_dataset_entries=_int(opts.get("maxdatasetentries", "20000"), "maxDatasetEntries", minimum=1),
            starting_position=opts.get("startingposition", "earliest").lower(),
            redis_timeout=parse_duration(opts.get("redistimeout", "30")),
            redis_user=opts.get("redisuser") or None,
            redis_password=opts.get("redispassword") or None,
            trim=_bool(opts.get("trim", "false"), "trim"),
            controller=opts.get("controller") or None,
            controller_query=opts.get("controllerquery") or None,
            controller_secret=opts.get("controllersecret") or None,
            window_period=parse_duration(opts.get("windowperiod", "0")),
            watermark_delay=parse_duration(opts.get("watermarkdelay", "0")),
        )
        o.validate()
        o.file_format_spec()  # checks the delimiter
        _check_names(o)
        return o

    def file_format_spec(self):
        from adaptstream.connectors.parsing import FileFormat

        return FileFormat(self.file_format, self.header, self.delimiter, self.null_value, self.multiline)

    def validate(self) -> None:
        if self.controller:
            from adaptstream.control.ipc import parse_address

            parse_address(self.controller)
        if self.window_period < 0 or self.watermark_delay < 0:
            msg = "options windowPeriod and watermarkDelay must be >= 0 seconds"
            raise ConfigError(msg)
        if self.read_on not in READ_ON:
            msg = f"unknown readOn {self.read_on!r}; valid choices: {', '.join(READ_ON)}"
            raise ConfigError(msg)
        if self.connector == "redis":
            self._validate_redis()
        if self.rate <= 0 and self.connector == "generator":
            msg = f"option rate must be > 0 rows per second, got {self.rate}"
            raise ConfigError(msg)
        if self.period <= 0:
            msg = f"option period must be > 0 seconds, got {self.period}"
            raise ConfigError(msg)
        if self.duration is not None and self.duration <= 0:
            msg = f"option duration must be > 0 seconds, got {self.duration}"
            raise ConfigError(msg)
        if self.connector == "files" and not self.path:
            msg = "the files connector needs .option('path', DIR): the directory it watches for new files"
            raise ConfigError(msg)
        if self.connector == "generator" and not self.generator:
            msg = "the generator connector needs .option('generator', NAME), e.g. linear_road or task_events"
            raise ConfigError(msg)
        if self.connector == "generator" and not (self.path or self.state_path or self.metrics_path):
            msg = "the generator connector needs a directory to write its datasets to: set path or metricsPath"
            raise ConfigError(msg)
        if self.start_gate and self.connector != "generator":
            msg = "option startGate only applies to generated input (connector generator)"
            raise ConfigError(msg)
        if self.drain and self.connector == "files" and not self.sentinel_path:
            msg = "drain needs sentinelPath: the end-of-input rows that move the watermark past the last window"
            raise ConfigError(msg)
        if self.sentinel_path and not os.path.exists(self.sentinel_path):
            msg = f"sentinelPath {self.sentinel_path!r} does not exist"
            raise ConfigError(msg)

    def _validate_redis(self) -> None:
        from adaptstream.connectors.redis import ENTRY_FORMATS, STARTING_POSITIONS

        if not self.path:
            msg = "the redis connector needs .option('path', 'redis[s]://[USER[:PASSWORD]@]HOST:PORT[/DB]/STREAM')"
            raise ConfigError(msg)
        self.redis_address()
        if self.entry_format not in ENTRY_FORMATS:
            msg = f"unknown entryFormat {self.entry_format!r}; valid choices: {', '.join(ENTRY_FORMATS)}"
            raise ConfigError(msg)
        if self.starting_position not in STARTING_POSITIONS:
            msg = f"unknown startingPosition {self.starting_position!r}; valid choices: {', '.join(STARTING_POSITIONS)}"
            raise ConfigError(msg)
        if not (self.state_path or self.metrics_path):
            msg = (
                "the redis connector needs a local directory for its manifest and offsets: set statePath "
                "(or metricsPath)"
            )
            raise ConfigError(msg)
        if self.redis_timeout <= 0:
            msg = f"option redisTimeout must be > 0 seconds, got {self.redis_timeout}"
            raise ConfigError(msg)

    def redis_address(self):
        """The server and streams to read, with the credentials of the options, the URL or the environment."""
        from adaptstream.connectors.redis import parse_url

        return parse_url(str(self.path), self.redis_user, self.redis_password)

    def redis_entry_format(self):
        from adaptstream.connectors.redis import EntryFormat

        return EntryFormat(self.entry_format, self.row_field, self.file_format_spec())

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
