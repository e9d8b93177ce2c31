"""Fuzzing (#57 item 3): row parsing, Redis entry parsing and source options never end in an uncaught exception.

Property-based (Hypothesis), bounded so the suite stays fast; the seed corpus below holds inputs that once broke
a parser or a check, each kept as an explicit example. A crash found here becomes one more example."""

from __future__ import annotations

import contextlib

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from adaptstream.connectors.parsing import FileFormat, parse_bytes
from adaptstream.errors import AdaptstreamError
from adaptstream.spark.options import SourceOptions, known_options

SCHEMA = pa.schema([("k", pa.string()), ("v", pa.int32()), ("x", pa.float64()), ("t", pa.timestamp("us", "UTC"))])
BOUNDED = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

#: inputs that broke something once (or sit on an edge): quotes left open, a lone CR, undecodable bytes, a row
#: with the delimiter only, a header line alone, a BOM, a NUL
SEED_ROWS = [
    b'"unclosed,1,2.0,2026-01-01\n',
    b"a,1,2.0,2026-01-01\r",
    b"\xff\xfe,1,2,3\n",
    b",,,\n",
    b"k,v,x,t\n",
    b"\xef\xbb\xbfa,1,1.5,2026-01-01T00:00:00\n",
    b"a\x00b,1,1,2026-01-01\n",
    b'{"k": "a", "v": 99999999999}\n',
    b'[1, 2]\n{"k": 1}\n',
    b"a",  # found by this fuzzer: a header line alone, no newline, crashed pyarrow's skip_rows (header=true)
    b"\x00",
]

_row_bytes = st.lists(
    st.one_of(
        st.binary(max_size=40),
        st.lists(st.sampled_from(["a", "1", "-7", "2.5", "", '"', '""', "nan", "2026-01-01", "x y"]), max_size=5).map(
            lambda fs: ",".join(fs).encode()
        ),
    ),
    max_size=12,
).map(lambda lines: b"\n".join(lines))


def _check_result(data: bytes, res) -> None:
    assert res.table.schema == SCHEMA
    for bad in res.bad:
        assert bad.get("reason") and "raw" in bad  # every refused row says what and why


@pytest.mark.parametrize("multiline", [True, False])
@pytest.mark.parametrize("header", [False, True])
def test_csv_parsing_never_raises(multiline, header):
    fmt = FileFormat("csv", header=header, multiline=multiline)

    @BOUNDED
    @given(_row_bytes)
    def one(data: bytes) -> None:
        _check_result(data, parse_bytes(data, SCHEMA, fmt))

    for seed in SEED_ROWS:
        _check_result(seed, parse_bytes(seed, SCHEMA, fmt))
    one()


_json_line = st.one_of(
    st.binary(max_size=30),
    st.dictionaries(
        st.sampled_from(["k", "v", "x", "t", "extra"]),
        st.one_of(st.none(), st.integers(), st.floats(), st.text(max_size=5), st.booleans(), st.lists(st.integers())),
        max_size=5,
    ).map(lambda d: __import__("json").dumps(d).encode()),
)


@BOUNDED
@given(st.lists(_json_line, max_size=10))
@example([b'{"k": "a", "v": 99999999999}', b"[1, 2]", b'{"k": 1}'])
def test_json_lines_parsing_never_raises_and_accounts_for_every_line(lines):
    data = b"\n".join(lines) + b"\n"
    res = parse_bytes(data, SCHEMA, FileFormat("json"))
    _check_result(data, res)
    nonblank = [x for x in data.split(b"\n") if x.strip()]
    assert res.table.num_rows + len(res.bad) == len(nonblank)  # each line is a row or a quarantined record


def test_redis_entries_parsing_never_raises():
    from adaptstream.connectors.redis import EntryFormat, parse_entries

    @BOUNDED
    @given(
        st.lists(
            st.dictionaries(
                st.sampled_from([b"row", b"k", b"v", b"x", b"t", b"other"]), st.binary(max_size=20), max_size=4
            ),
            max_size=8,
        ),
        st.sampled_from(["row", "fields"]),
    )
    def one(fields, kind):
        entries = [(f"{1000 + i}-0".encode(), f) for i, f in enumerate(fields)]
        res = parse_entries(entries, SCHEMA, EntryFormat(kind=kind))
        _check_result(b"", res)
        assert res.table.num_rows + len(res.bad) == len(entries)  # one entry, one row or one quarantined record

    one()


def test_a_redis_entry_is_one_record_whatever_its_row_holds():
    """Caught by the fuzz above (on the old parser): in the row format an entry holding a line break became two
    rows, one with an open quote swallowed the next entry, and a blank one vanished. Each is now one row or one
    quarantined record."""
    from adaptstream.connectors.redis import EntryFormat, parse_entries

    rows = [
        b"a,1,1.0,2026-01-01",
        b"b,2\nc,3",
        b'"open,4,4.0,2026-01-01',
        b"d,5,5.0,2026-01-01",
        b"",
        b'"q\nr",6,6,2026-01-01',
    ]
    entries = [(f"{1000 + i}-0".encode(), {b"row": v}) for i, v in enumerate(rows)]
    res = parse_entries(entries, SCHEMA, EntryFormat())
    assert res.table.num_rows + len(res.bad) == len(entries)
    assert sorted(res.table.column("k").to_pylist()) == ["a", "d", "q\nr"]
    assert sorted(b["id"] for b in res.bad) == ["1001-0", "1002-0", "1004-0"]


_option_value = st.one_of(
    st.text(max_size=12),
    st.sampled_from(["0", "-1", "1e999", "nan", "true", "maybe", "10 seconds", "5 parsecs", "redis://h:1/s", ";;"]),
)


@BOUNDED
@given(st.dictionaries(st.sampled_from(sorted(known_options())), _option_value, max_size=6))
@example({"delimiter": ";;"})
@example({"path": "redis://u:pw@h:0/s", "statepath": "/tmp/x"})
@example({"numblocks": "1e999"})
def test_source_options_are_accepted_or_refused_with_an_adaptstream_error(opts):
    with contextlib.suppress(AdaptstreamError):  # a clear refusal; anything else (TypeError, ...) fails the test
        SourceOptions.parse(opts)
