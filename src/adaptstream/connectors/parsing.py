"""Parse one dataset file into Arrow under a declared schema; malformed rows are quarantined, never dropped.

Fast path: pyarrow reads the whole file typed. If that fails (bad value, wrong field count, broken JSON) the slow
path reads every field as text, casts column by column, and moves the rows that do not fit into the quarantine
with the reason, so one bad row costs its own row only.
"""

from __future__ import annotations

import io
import json
from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pcsv
import pyarrow.json as pjson

from adaptstream.errors import ConnectorError


@dataclass
class ParseResult:
    table: pa.Table
    bad: list[dict] = field(default_factory=list)  # {"line": n, "raw": text, "reason": why}


def parse_file(path: str, schema: pa.Schema, fmt: str, header: bool = False, delimiter: str = ",") -> ParseResult:
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        msg = f"cannot read dataset {path}: {e}"
        raise ConnectorError(msg) from e
    if fmt == "csv":
        return parse_csv(data, schema, header, delimiter)
    if fmt in ("json", "jsonl"):
        return parse_jsonl(data, schema)
    msg = f"unknown fileFormat {fmt!r}; valid choices: csv, json"
    raise ConnectorError(msg)


def _csv_opts(schema: pa.Schema, header: bool, delimiter: str, types: dict | None):
    read = pcsv.ReadOptions(column_names=None if header else schema.names, autogenerate_column_names=False)
    if header:
        read = pcsv.ReadOptions(skip_rows=1, column_names=schema.names)
    conv = pcsv.ConvertOptions(column_types=types or {f.name: _naive(f.type) for f in schema}, strings_can_be_null=True,
                               quoted_strings_can_be_null=False)
    return read, conv


def parse_csv(data: bytes, schema: pa.Schema, header: bool = False, delimiter: str = ",") -> ParseResult:
    if not data.strip():
        return ParseResult(schema.empty_table())
    read, conv = _csv_opts(schema, header, delimiter, None)
    try:
        table = pcsv.read_csv(io.BytesIO(data), read_options=read, parse_options=pcsv.ParseOptions(delimiter=delimiter),
                              convert_options=conv)
        return ParseResult(table.select(schema.names).cast(schema))
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        pass
    lines = data.decode("utf-8", errors="replace").splitlines()
    start = 1 if header else 0
    bad: list[dict] = []
    rows: list[list[str | None]] = []
    line_nos: list[int] = []
    import csv

    for i, fields in enumerate(csv.reader(lines[start:], delimiter=delimiter), start=start + 1):
        if not fields:
            continue
        if len(fields) != len(schema):
            bad.append({"line": i, "raw": lines[i - 1], "reason": f"{len(fields)} fields, expected {len(schema)}"})
            continue
        rows.append([v if v != "" else None for v in fields])
        line_nos.append(i)
    text = pa.table({f.name: pa.array([r[k] for r in rows], pa.string()) for k, f in enumerate(schema)})
    table, more_bad = _cast_rows(text, schema, line_nos, lines)
    return ParseResult(table, bad + more_bad)


def _naive(t: pa.DataType) -> pa.DataType:
    """Timestamps without an offset are read as UTC (Spark's session time zone here), as Spark's CSV reader does."""
    return pa.timestamp(t.unit) if pa.types.is_timestamp(t) and t.tz else t


def _cast(values: pa.Array | pa.ChunkedArray, t: pa.DataType) -> pa.Array | pa.ChunkedArray:
    try:
        return pc.cast(values, t)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        if _naive(t) is t:
            raise
    try:
        return pc.cast(pc.cast(values, _naive(t)), t)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        if len(values) <= 1:
            raise
    # a column mixing offset and naive timestamps: value by value
    return pa.concat_arrays([_cast(pa.array([v], pa.string()), t) for v in values.to_pylist()])


def _cast_rows(text: pa.Table, schema: pa.Schema, line_nos: list[int], lines: list[str]) -> tuple[pa.Table, list[dict]]:
    """Cast a text table to ``schema``; rows whose values do not fit become quarantine records."""
    ok = [True] * text.num_rows
    reasons: dict[int, str] = {}
    for f in schema:
        col = text.column(f.name)
        try:
            _cast(col, f.type)
            continue
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            pass
        for r, v in enumerate(col.to_pylist()):
            if v is None or not ok[r]:
                continue
            try:
                _cast(pa.array([v], pa.string()), f.type)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
                ok[r] = False
                reasons[r] = f"column {f.name}: {v!r} is not {f.type}"
    mask = pa.array(ok)
    kept = text.filter(mask)
    table = pa.table({f.name: _cast(kept.column(f.name), f.type) for f in schema}, schema=schema)
    bad = [{"line": line_nos[r], "raw": lines[line_nos[r] - 1], "reason": reasons[r]} for r in sorted(reasons)]
    return table, bad


def parse_jsonl(data: bytes, schema: pa.Schema) -> ParseResult:
    if not data.strip():
        return ParseResult(schema.empty_table())
    try:
        table = pjson.read_json(io.BytesIO(data), parse_options=pjson.ParseOptions(explicit_schema=schema,
                                                                                unexpected_field_behavior="ignore"))
        return ParseResult(table.select(schema.names).cast(schema))
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        pass
    lines = data.decode("utf-8", errors="replace").splitlines()
    bad: list[dict] = []
    records: list[dict] = []
    line_nos: list[int] = []
    for i, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
            if not isinstance(obj, dict):
                raise ValueError("not a JSON object")
        except ValueError as e:
            bad.append({"line": i, "raw": line, "reason": f"invalid JSON: {e}"})
            continue
        records.append(obj)
        line_nos.append(i)
    text = pa.table({f.name: pa.array([None if r.get(f.name) is None else str(r.get(f.name)) for r in records],
                                      pa.string()) for f in schema})
    table, more_bad = _cast_rows(text, schema, line_nos, lines)
    return ParseResult(table, bad + more_bad)
