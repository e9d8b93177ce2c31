"""Parse dataset bytes into Arrow under a declared schema; malformed rows are quarantined, never dropped.

One tokenizer (pyarrow.csv, or pyarrow.json for JSON lines) and one set of null tokens serve every path, so the same
row gives the same result whichever file it is in. Fast path: pyarrow reads the bytes typed; rows with the wrong
number of fields are set aside by pyarrow's invalid-row handler. If a value does not convert (a bad number, bytes
that are not UTF-8) the slow path reads every field as raw bytes and converts column by column, bisecting to the
values that fail, so one bad value costs its own row only. Quarantine records carry the record number, the byte
offset of the record in the range, the raw text (undecodable bytes shown as \\x escapes) and the reason.
"""

from __future__ import annotations

import functools
import io
import json
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pcsv
import pyarrow.json as pjson

from adaptstream.errors import ConfigError, ConnectorError

FORMATS = ("csv", "json", "parquet")


@dataclass(frozen=True)
class FileFormat:
    """How dataset bytes are parsed; shipped to the executors inside each input partition's reader."""

    kind: str = "csv"  # csv | json (JSON lines) | parquet (whole files)
    header: bool = False
    delimiter: str = ","
    null_value: str = ""  # the one token read as null (Spark's CSV nullValue); quoted "" stays an empty string
    multiline: bool = True  # newlines inside quoted values belong to the value

    def __post_init__(self) -> None:
        if self.kind not in FORMATS:
            msg = f"unknown fileFormat {self.kind!r}; valid choices: {', '.join(FORMATS)}"
            raise ConfigError(msg)
        if len(self.delimiter) != 1 or self.delimiter in '"\n\r':
            msg = f"option delimiter must be one character other than a quote or newline, got {self.delimiter!r}"
            raise ConfigError(msg)


@dataclass
class ParseResult:
    table: pa.Table
    bad: list[dict] = field(default_factory=list)  # {"row", "offset", "raw", "reason"}


def parse_bytes(data: bytes, schema: pa.Schema, fmt: FileFormat, header: bool | None = None) -> ParseResult:
    """Parse one byte range; ``header`` overrides fmt.header (a range appended later has no header line)."""
    has_header = fmt.header if header is None else header
    if fmt.kind == "csv":
        return parse_csv(data, schema, has_header, fmt.delimiter, fmt.null_value, fmt.multiline)
    if fmt.kind == "parquet":
        return parse_parquet(data, schema)
    return parse_jsonl(data, schema)


# -- Parquet ------------------------------------------------------------------------------------------------
def _file_bad(reason: str) -> dict:
    return {"row": None, "offset": None, "raw": None, "reason": reason}


def parse_parquet(data: bytes, schema: pa.Schema) -> ParseResult:
    """A whole Parquet file under the query's schema (columns by name; extra columns are not read). A file that does
    not read, or whose columns are missing or do not convert, is one quarantined file event naming both schemas."""
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(pa.BufferReader(data))
    except (OSError, ValueError) as e:  # ArrowInvalid is a ValueError
        return ParseResult(schema.empty_table(), [_file_bad(f"not a readable Parquet file: {e}")])
    missing = [n for n in schema.names if n not in table.schema.names]
    wrong = [f.name for f in schema if f.name not in missing and not _castable(table.schema.field(f.name).type, f.type)]
    if wrong:
        why = f"column(s) {wrong} have another type"
    elif not missing:
        try:  # a timestamp without time zone is read as UTC, as for CSV
            return ParseResult(table.select(schema.names).cast(schema))
        except (ValueError, TypeError, NotImplementedError, pa.ArrowException) as e:
            why = f"its columns do not convert ({e})"
    else:
        why = f"it has no column(s) {missing}"
    return ParseResult(
        schema.empty_table(),
        [_file_bad(f"Parquet schema {_short(table.schema)} does not match the query's schema {_short(schema)}: {why}")],
    )


def _castable(src: pa.DataType, dst: pa.DataType) -> bool:
    """Same type, or a safe cast within one family (numbers, timestamps, strings), as Spark reads Parquet: a
    string column is never parsed into numbers."""
    if src == dst:
        return True
    families = (
        lambda t: pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_decimal(t),
        pa.types.is_timestamp,
        lambda t: pa.types.is_string(t) or pa.types.is_large_string(t),
        pa.types.is_date,
    )
    return any(f(src) and f(dst) for f in families)


def _short(schema: pa.Schema) -> str:
    return "(" + ", ".join(f"{f.name} {f.type}" for f in schema) + ")"


def read_range(path: str, start: int = 0, length: int | None = None) -> bytes:
    try:
        with open(path, "rb") as f:
            f.seek(start)
            data = f.read() if length is None else f.read(length)
    except OSError as e:
        msg = f"cannot read dataset {path}: {e}"
        raise ConnectorError(msg) from e
    if length is not None and len(data) != length:
        msg = f"dataset {path} is shorter than when it was admitted ({start + len(data)} < {start + length} bytes)"
        raise ConnectorError(msg)
    return data


# -- CSV ----------------------------------------------------------------------------------------------------
def _naive(t: pa.DataType) -> pa.DataType:
    """Timestamps without an offset are read as UTC (Spark's session time zone here), as Spark's CSV reader does."""
    return pa.timestamp(t.unit) if pa.types.is_timestamp(t) and t.tz else t


def _read_csv(
    data: bytes, names: list[str], types: dict, header: bool, delimiter: str, null_value: str, multiline: bool
) -> tuple[pa.Table, list]:
    invalid: list = []

    def on_invalid(row) -> str:
        invalid.append(row)
        return "skip"

    read = pcsv.ReadOptions(
        column_names=names, skip_rows=1 if header else 0, use_threads=False, block_size=max(len(data) + 1, 1 << 16)
    )  # one block: a row of any size fits
    parse = pcsv.ParseOptions(delimiter=delimiter, newlines_in_values=multiline, invalid_row_handler=on_invalid)
    conv = pcsv.ConvertOptions(
        column_types=types, null_values=[null_value], strings_can_be_null=True, quoted_strings_can_be_null=False
    )
    table = pcsv.read_csv(io.BytesIO(data), read_options=read, parse_options=parse, convert_options=conv)
    return table, invalid


def parse_csv(
    data: bytes,
    schema: pa.Schema,
    header: bool = False,
    delimiter: str = ",",
    null_value: str = "",
    multiline: bool = True,
) -> ParseResult:
    if not data.strip() or (header and not data.partition(b"\n")[2].strip()):
        return ParseResult(schema.empty_table())  # nothing, or a header line alone (pyarrow cannot skip it)
    names = schema.names
    try:
        if not data.isascii():  # pyarrow cannot hand a non-UTF-8 row to the invalid-row handler: slow path first
            data.decode("utf-8")
        table, invalid = _read_csv(
            data, names, {f.name: _naive(f.type) for f in schema}, header, delimiter, null_value, multiline
        )
        typed, cast_bad = table.select(names).cast(schema), list[tuple[int, str]]()
    except (pa.ArrowInvalid, pa.ArrowTypeError, UnicodeDecodeError):
        original = data
        data, undecodable = _blank_undecodable(data, multiline)
        raw, invalid = _read_csv(
            data, names, dict.fromkeys(names, pa.binary()), header, delimiter, null_value, multiline
        )
        typed, cast_bad = _convert(raw, schema)
        if undecodable:
            bad = _csv_bad(data, header, multiline, len(schema), invalid, cast_bad, typed.num_rows + len(cast_bad))
            return ParseResult(typed, _renumber(original, multiline, bad + undecodable))
    if not invalid and not cast_bad:
        return ParseResult(typed)
    n_raw = typed.num_rows + len(cast_bad)
    return ParseResult(typed, _csv_bad(data, header, multiline, len(schema), invalid, cast_bad, n_raw))


def _blank_undecodable(data: bytes, multiline: bool) -> tuple[bytes, list[dict]]:
    """Records that are not UTF-8 become blank lines of the same length (pyarrow skips them and every other record
    keeps its byte offset); they are returned as quarantine records. pyarrow cannot hand such a record to the
    invalid-row handler, so they must go before it reads."""
    try:
        data.decode("utf-8")
        return data, []
    except UnicodeDecodeError:
        pass
    buf, bad = bytearray(data), []
    for s, e in _record_spans(data, multiline):
        try:
            data[s:e].decode("utf-8")
        except UnicodeDecodeError:
            bad.append(
                {
                    "row": None,
                    "offset": s,
                    "raw": data[s:e].decode("utf-8", errors="backslashreplace"),
                    "reason": "not valid UTF-8",
                }
            )
            buf[s:e] = b"\n" * (e - s)
    return bytes(buf), bad


def _renumber(data: bytes, multiline: bool, bad: list[dict]) -> list[dict]:
    """Record numbers in the original bytes (blanked records shifted pyarrow's numbering), found by offset."""
    number = {s: k for k, (s, _) in enumerate(_record_spans(data, multiline), start=1)}
    out = [{**b, "row": number.get(b["offset"], b["row"])} for b in bad]
    return sorted(out, key=lambda b: (b["row"] is None, b["row"] or 0))


def _record_spans(data: bytes, multiline: bool) -> list[tuple[int, int]]:
    """(start, end) of each non-empty record (the header included), as pyarrow splits them: a newline ends a record
    unless it lies inside a quoted value (an odd number of quote characters before it)."""
    buf = np.frombuffer(data, dtype=np.uint8)
    nl = np.flatnonzero(buf == 10)
    if multiline:
        parity = np.cumsum(buf == 34) & 1
        nl = nl[parity[nl] == 0]
    ends = np.append(nl, len(buf)) if not len(nl) or nl[-1] != len(buf) - 1 else nl
    spans, start = [], 0
    for e in ends.tolist():
        rec = data[start:e].rstrip(b"\r")
        if rec:
            spans.append((start, start + len(rec)))
        start = e + 1
    return spans


def _csv_bad(
    data: bytes,
    header: bool,
    multiline: bool,
    n_fields: int,
    invalid: list,
    cast_bad: list[tuple[int, str]],
    n_raw: int,
) -> list[dict]:
    """Quarantine records for rows pyarrow skipped (wrong field count) and rows whose values did not convert.
    Record numbers are pyarrow's (1-based, the header counted)."""
    spans = _record_spans(data, multiline)
    first = 2 if header else 1
    # the split agrees with pyarrow's: offsets and raw bytes are exact
    exact = len(spans) - (first - 1) == n_raw + len(invalid)
    skipped = {r.number for r in invalid if r.number is not None}
    kept = [k for k in range(first, len(spans) + 1) if k not in skipped] if exact else []
    out = []
    for r in invalid:
        out.append(
            _bad(
                data,
                spans,
                r.number if exact else None,
                r.text,
                f"{r.actual_columns} fields, expected {n_fields}",
                r.number,
            )
        )
    for i, reason in cast_bad:
        rec = kept[i] if exact else None
        out.append(_bad(data, spans, rec, None, reason, rec))
    return sorted(out, key=lambda b: (b["row"] is None, b["row"] or 0))


def _bad(data: bytes, spans: list, rec: int | None, text: str | None, reason: str, row: int | None) -> dict:
    offset = None
    if rec is not None and 0 < rec <= len(spans):
        s, e = spans[rec - 1]
        offset, text = s, data[s:e].decode("utf-8", errors="backslashreplace")
    return {"row": row, "offset": offset, "raw": text, "reason": reason}


# -- conversion with bisection ------------------------------------------------------------------------------
def _cast(values: pa.Array | pa.ChunkedArray, t: pa.DataType) -> pa.Array | pa.ChunkedArray:
    if pa.types.is_binary(values.type):
        values = pc.cast(values, pa.string())  # validates UTF-8
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


def _failing(arr: pa.Array, convert: Callable[[pa.Array], object], offset: int = 0) -> list[int]:
    """Indices of the values that do not convert, by bisection: O(bad * log n) conversions, not one per value."""
    try:
        convert(arr)
        return []
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
        if len(arr) == 1:
            return [offset]
    half = len(arr) // 2
    return _failing(arr.slice(0, half), convert, offset) + _failing(arr.slice(half), convert, offset + half)


def _convert(raw: pa.Table, schema: pa.Schema) -> tuple[pa.Table, list[tuple[int, str]]]:
    """Cast raw columns to ``schema``; rows with a value that does not fit are removed and reported."""
    reasons: dict[int, str] = {}
    for f in schema:
        col = raw.column(f.name).combine_chunks()
        for i in _failing(col, functools.partial(_cast, t=f.type)):
            v = col[i].as_py()
            shown = v.decode("utf-8", errors="backslashreplace") if isinstance(v, bytes) else str(v)
            shown = shown if len(shown) <= 80 else shown[:77] + "..."
            why = "not valid UTF-8" if isinstance(v, bytes) and _not_utf8(v) else f"is not {f.type}"
            reasons.setdefault(i, f"column {f.name}: {shown!r} {why}")
    mask = np.ones(raw.num_rows, dtype=bool)
    mask[list(reasons)] = False
    kept = raw.filter(pa.array(mask))
    table = pa.table({f.name: _cast(kept.column(f.name), f.type) for f in schema}, schema=schema)
    return table, sorted(reasons.items())


def _not_utf8(v: bytes) -> bool:
    try:
        v.decode("utf-8")
        return False
    except UnicodeDecodeError:
        return True


# -- JSON lines ---------------------------------------------------------------------------------------------
def parse_jsonl(data: bytes, schema: pa.Schema) -> ParseResult:
    if not data.strip():
        return ParseResult(schema.empty_table())
    try:
        opts = pjson.ParseOptions(explicit_schema=schema, unexpected_field_behavior="ignore")
        table = pjson.read_json(
            io.BytesIO(data),
            read_options=pjson.ReadOptions(use_threads=False, block_size=max(len(data) + 1, 1 << 16)),
            parse_options=opts,
        )
        return ParseResult(table.select(schema.names).cast(schema))
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        pass
    bad: list[dict] = []
    records: list[dict] = []
    where: list[tuple[int, int, bytes]] = []
    offset = 0
    for row, line in enumerate(data.split(b"\n"), start=1):  # JSON lines: only \n separates records
        at, offset = offset, offset + len(line) + 1
        if not line.strip():
            continue
        try:
            obj = json.loads(line.decode("utf-8"))
            if not isinstance(obj, dict):
                raise ValueError("not a JSON object")
        except UnicodeDecodeError:
            bad.append(_line_bad(row, at, line, "not valid UTF-8"))
            continue
        except ValueError as e:
            bad.append(_line_bad(row, at, line, f"invalid JSON: {e}"))
            continue
        records.append(obj)
        where.append((row, at, line))
    text = pa.table({f.name: pa.array([_json_text(r.get(f.name)) for r in records], pa.string()) for f in schema})
    table, cast_bad = _convert(text, schema)
    bad += [_line_bad(where[i][0], where[i][1], where[i][2], reason) for i, reason in cast_bad]
    return ParseResult(table, sorted(bad, key=lambda b: b["row"]))


def _json_text(v: object) -> str | None:
    if v is None:
        return None
    if isinstance(v, bool):
        return "true" if v else "false"
    return v if isinstance(v, str) else json.dumps(v)


def _line_bad(row: int, offset: int, line: bytes, reason: str) -> dict:
    return {"row": row, "offset": offset, "raw": line.decode("utf-8", errors="backslashreplace"), "reason": reason}
