"""Options as dataclass fields with metadata: each field knows its Spark option name, kind, range and help.

One coercion (``coerce``) turns the strings Spark hands a source into typed values, one parser (``parse_kv``) reads
``name=value;name=value`` parameter strings, and the option names a config accepts come from its fields, so a new
option is one field, never an edit of a hand-kept list. Errors name the option and the accepted form.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Mapping
from typing import Any, TypeVar

from adaptstream.errors import ConfigError
from adaptstream.timeparse import parse_duration

C = TypeVar("C")
KINDS = ("str", "lower", "name", "bool", "int", "float", "duration", "bytes", "list", "regex")
_SIZE = re.compile(r"^\s*([0-9]+)\s*([kmgt]?)i?b?\s*$", re.IGNORECASE)


def option(
    spark: str,
    default: Any,
    kind: str = "str",
    *,
    low: float | None = None,
    high: float | None = None,
    choices: tuple[str, ...] = (),
    help: str = "",
    secret: bool = False,
) -> Any:
    """A dataclass field read from the Spark option ``spark`` (case-insensitive, as Spark's options are)."""
    if kind not in KINDS:
        msg = f"option kind {kind!r} is not one of {KINDS}"
        raise ValueError(msg)
    meta = {"spark": spark, "kind": kind, "low": low, "high": high, "choices": choices, "help": help}
    return dataclasses.field(default=default, repr=not secret, metadata=meta)


def option_fields(cls: type) -> dict[str, dataclasses.Field]:
    """Lower-case Spark option name -> field, for the fields of ``cls`` read from options."""
    return {f.metadata["spark"].lower(): f for f in dataclasses.fields(cls) if "spark" in f.metadata}


def _bool(value: str, name: str) -> bool:
    v = value.strip().lower()
    if v in ("true", "1", "yes"):
        return True
    if v in ("false", "0", "no", ""):
        return False
    msg = f"option {name} must be true or false, got {value!r}"
    raise ConfigError(msg)


def _number(value: str, name: str, kind: str) -> float:
    try:
        return int(value.strip()) if kind == "int" else float(value)
    except ValueError:
        word = "an integer" if kind == "int" else "a number"
        msg = f"option {name} must be {word}, got {value!r}"
        raise ConfigError(msg) from None


def parse_bytes(value: str, name: str) -> int:
    """Sizes like '256m', '1g', '65536'; 0 means no cap."""
    m = _SIZE.match(value)
    if not m:
        msg = f"option {name} must be a size in bytes such as 65536, 256m or 1g, got {value!r}"
        raise ConfigError(msg)
    return int(m.group(1)) * 1024 ** "_kmgt".index(m.group(2).lower() or "_")


def _regex(value: str, name: str) -> str | None:
    if not value:
        return None
    try:
        re.compile(value)
    except re.error as e:
        msg = f"option {name} is not a valid regular expression: {value!r} ({e})"
        raise ConfigError(msg) from None
    return value


def _typed(kind: str, value: str, name: str) -> Any:
    if kind == "bool":
        return _bool(value, name)
    if kind in ("int", "float"):
        return _number(value, name, kind)
    if kind == "duration":
        return parse_duration(value)
    if kind == "bytes":
        return parse_bytes(value, name)
    if kind == "list":
        return tuple(c.strip() for c in value.split(",") if c.strip())
    if kind == "regex":
        return _regex(value, name)
    if kind == "name":  # a registered name (any case), or package.module:Name kept as written
        return value if ":" in value else value.strip().lower()
    return value.lower() if kind == "lower" else value


def coerce(f: dataclasses.Field, value: str) -> Any:
    """The typed value of option string ``value`` for field ``f``, checked against its range and choices."""
    meta = f.metadata
    name = meta["spark"]
    x = _typed(meta["kind"], str(value), name)
    low, high = meta["low"], meta["high"]
    in_range = (low is None or x >= low) and (high is None or x <= high)
    if isinstance(x, int | float) and not isinstance(x, bool) and not in_range:
        bounds = f"[{'-inf' if low is None else low}, {'inf' if high is None else high}]"
        msg = f"option {name} must be in {bounds}, got {value!r}"
        raise ConfigError(msg)
    if meta["choices"] and x not in meta["choices"]:
        msg = f"unknown {name} {x!r}; valid choices: {', '.join(meta['choices'])}"
        raise ConfigError(msg)
    return x


def from_options(cls: type[C], options: Mapping[str, str], **fixed: Any) -> C:
    """An instance of ``cls`` from lower-case option names (absent ones keep their defaults); ``fixed`` fields are
    given as they are. Unknown names are the caller's to refuse (a source's options span several configs)."""
    values: dict[str, Any] = dict(fixed)
    for key, f in option_fields(cls).items():
        if key in options and f.name not in fixed:
            raw = options[key]
            values[f.name] = None if raw == "" and f.default is None else coerce(f, raw)
    return cls(**values)


def coerce_param(what: str, value: Any, default: Any) -> Any:
    """A policy parameter given as an option string ("3", "0.9", "true", "inf") in the type of its default."""
    if not isinstance(value, str) or isinstance(default, str) or default is dataclasses.MISSING or default is None:
        return value
    text = value.strip()
    try:
        if isinstance(default, bool):
            if text.lower() not in ("true", "false"):
                raise ValueError(text)
            return text.lower() == "true"
        if isinstance(default, int):
            return int(text)
        if isinstance(default, float):
            return float(text)
    except ValueError:
        msg = f"{what}={value!r} is not a valid {type(default).__name__}"
        raise ConfigError(msg) from None
    return value


def parse_kv(text: str, what: str) -> dict[str, str]:
    """``name=value;name=value`` (blank parts ignored) -> dict; ``what`` names the option in errors."""
    out: dict[str, str] = {}
    for part in str(text or "").split(";"):
        if not part.strip():
            continue
        k, sep, v = part.partition("=")
        if not sep or not k.strip():
            msg = f"{what} must look like 'name=value;name=value', got {text!r}"
            raise ConfigError(msg)
        out[k.strip()] = v.strip()
    return out


def describe(classes: Iterable[type]) -> list[tuple[str, str, str, str]]:
    """(Spark name, kind, default, help) of every option field: the rows of the README's option table."""
    rows = []
    for cls in classes:
        for f in option_fields(cls).values():
            default = "" if f.default is None or not f.repr else str(f.default)
            rows.append((f.metadata["spark"], f.metadata["kind"], default, f.metadata["help"]))
    return rows
