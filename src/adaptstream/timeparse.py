"""Parse Spark-style durations ("10 seconds", "500ms", "2 min", "0") into seconds."""

from __future__ import annotations

import re

from adaptstream.errors import ConfigError

_UNITS = {
    "ms": 0.001,
    "milli": 0.001,
    "millis": 0.001,
    "millisecond": 0.001,
    "milliseconds": 0.001,
    "s": 1.0,
    "sec": 1.0,
    "secs": 1.0,
    "second": 1.0,
    "seconds": 1.0,
    "m": 60.0,
    "min": 60.0,
    "mins": 60.0,
    "minute": 60.0,
    "minutes": 60.0,
    "h": 3600.0,
    "hour": 3600.0,
    "hours": 3600.0,
}
_RE = re.compile(r"^\s*([0-9]*\.?[0-9]+)\s*([a-zA-Z]*)\s*$")


def parse_duration(text: str | float | int) -> float:
    """Seconds in ``text``; a bare number means seconds."""
    if isinstance(text, int | float):
        value = float(text)
    else:
        m = _RE.match(str(text))
        if not m:
            msg = f"cannot read a duration from {text!r}; write e.g. '10 seconds', '500ms' or '0'"
            raise ConfigError(msg)
        unit = m.group(2).lower() or "s"
        if unit not in _UNITS:
            msg = f"unknown time unit {m.group(2)!r} in {text!r}; valid units: ms, s, min, h"
            raise ConfigError(msg)
        value = float(m.group(1)) * _UNITS[unit]
    if value < 0:
        msg = f"a duration must not be negative: {text!r}"
        raise ConfigError(msg)
    return value
