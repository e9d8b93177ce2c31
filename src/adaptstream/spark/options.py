"""Options of ``spark.readStream.format("adaptstream")``, read once into a frozen config (pure Python)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from adaptstream.errors import ConfigError
from adaptstream.timeparse import parse_duration

CONNECTORS = ("files", "generator")
_KNOWN = {
    "connector", "path", "fileformat", "header", "delimiter", "admission", "slide", "trigger", "margin",
    "metricspath", "statepath", "generator", "traffic", "rate", "duration", "seed", "jitter", "amplitude",
    "period", "drain", "sentinelpath", "partitioner", "numblocks", "partitionkey", "partitionwindow",
    "partitionerparams", "pollinterval",
}


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
        n = int(float(value))
    except ValueError:
        msg = f"option {name} must be an integer, got {value!r}"
        raise ConfigError(msg) from None
    if n < minimum:
        msg = f"option {name} must be >= {minimum}, got {n}"
        raise ConfigError(msg)
    return n


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
    partitioner: str = "time"
    num_blocks: int = 2
    partition_key: tuple[str, ...] = ()
    partition_window: float = 0.0
    partitioner_params: str = ""

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> SourceOptions:
        opts = {str(k).lower(): str(v) for k, v in options.items()}
        unknown = sorted(set(opts) - _KNOWN - {"schema"})
        if unknown:
            msg = f"unknown adaptstream option(s): {', '.join(unknown)}; valid options: {', '.join(sorted(_KNOWN))}"
            raise ConfigError(msg)
        connector = opts.get("connector", "files").lower()
        if connector not in CONNECTORS:
            msg = f"unknown connector {connector!r}; valid choices: {', '.join(CONNECTORS)}"
            raise ConfigError(msg)
        fmt = opts.get("fileformat", "csv").lower()
        if fmt not in ("csv", "json", "jsonl"):
            msg = f"unknown fileFormat {fmt!r}; valid choices: csv, json"
            raise ConfigError(msg)
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
            jitter=float(opts.get("jitter", "0.25")),
            amplitude=float(opts.get("amplitude", "0.5")),
            period=parse_duration(opts.get("period", "60")),
            drain=_bool(opts.get("drain", "false"), "drain"),
            sentinel_path=opts.get("sentinelpath"),
            partitioner=opts.get("partitioner", "time").lower(),
            num_blocks=_int(opts.get("numblocks", "2"), "numBlocks", minimum=1),
            partition_key=tuple(c.strip() for c in opts.get("partitionkey", "").split(",") if c.strip()),
            partition_window=parse_duration(opts.get("partitionwindow", "0")),
            partitioner_params=opts.get("partitionerparams", ""),
        )
        o.validate()
        return o

    def validate(self) -> None:
        if self.connector == "files" and not self.path:
            msg = "the files connector needs .option('path', DIR): the directory it watches for new files"
            raise ConfigError(msg)
        if self.connector == "generator" and not self.generator:
            msg = "the generator connector needs .option('generator', NAME), e.g. linear_road or task_events"
            raise ConfigError(msg)
        if self.connector == "generator" and not (self.path or self.state_path or self.metrics_path):
            msg = "the generator connector needs a directory to write its datasets to: set path or metricsPath"
            raise ConfigError(msg)
        if self.drain and self.connector == "files" and not self.sentinel_path:
            msg = "drain needs sentinelPath: the end-of-input rows that move the watermark past the last window"
            raise ConfigError(msg)
        if self.sentinel_path and not os.path.exists(self.sentinel_path):
            msg = f"sentinelPath {self.sentinel_path!r} does not exist"
            raise ConfigError(msg)

    @property
    def state_dir(self) -> str:
        """Where the manifest lives: statePath, else <metricsPath>/source, else <path>/_adaptstream."""
        if self.state_path:
            return self.state_path
        if self.metrics_path:
            return os.path.join(self.metrics_path, "source")
        return os.path.join(str(self.path), "_adaptstream")

    @property
    def input_dir(self) -> str:
        if self.path:
            return self.path
        return os.path.join(self.state_dir, "input")
