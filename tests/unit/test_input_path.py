"""The input path without Spark: one parser, exact file admission, crash-safe state, early validation.

Each test names the defect of the input-path issue it guards against (items 1-9)."""

from __future__ import annotations

import csv
import io
import json
import os

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from adaptstream.connectors.base import Manifest, StateLock, fingerprint, read_jsonl
from adaptstream.connectors.files import FilesConnector, ignored
from adaptstream.connectors.parsing import FileFormat, parse_csv, parse_jsonl
from adaptstream.connectors.ranges import FileSlice, group_by_bytes, parse_slice
from adaptstream.errors import ConfigError, ConnectorError
from adaptstream.spark.accounting import Quarantine
from adaptstream.spark.options import SourceOptions

SCHEMA = pa.schema([("k", pa.string()), ("v", pa.int32()), ("x", pa.float64())])


# -- item 1, 2, 3, 5: one parser ----------------------------------------------------------------------------
def test_file_of_only_malformed_rows_is_an_empty_typed_table():
    res = parse_csv(b"oops\nstill,bad\nx,notanint,1\n", SCHEMA)
    assert res.table.num_rows == 0 and res.table.schema == SCHEMA
    assert [b["row"] for b in res.bad] == [1, 2, 3]


def test_oversize_field_and_a_bad_row_do_not_crash():
    big = "y" * 300_000
    res = parse_csv(f"{big},1,1.5\nbad\nz,2,2\n".encode(), SCHEMA)
    assert [r["k"] for r in res.table.to_pylist()] == [big, "z"]
    assert [(b["row"], b["raw"]) for b in res.bad] == [(2, "bad")]


def test_null_tokens_read_the_same_in_the_fast_and_the_slow_path():
    rows = b'NA,1,NaN\nnull,2,\n,3,1.5\n"",4,2\n'
    fast = parse_csv(rows, SCHEMA)
    slow = parse_csv(rows + b"broken,notanint,1\n", SCHEMA)  # the bad value sends the file down the slow path
    assert fast.bad == [] and len(slow.bad) == 1
    assert repr(slow.table.to_pylist()) == repr(fast.table.to_pylist())  # repr: NaN == NaN
    got = fast.table.to_pylist()
    assert [r["k"] for r in got] == ["NA", "null", None, ""]  # only the empty token is null; quoted "" is a string
    assert got[0]["x"] != got[0]["x"] and got[1]["x"] is None  # NaN is a float NaN, empty is null


def test_slow_path_keeps_quoted_newlines_and_odd_separators_and_quarantines_undecodable_bytes():
    data = 'a,1,1\n"multi\nline",2,2\nform\x0cfeed,3,3\nsep\u2028ara,4,4\n'.encode() + b"\xff\xfe,5,5\nbad,xx,1\n"
    res = parse_csv(data, SCHEMA)
    assert [r["k"] for r in res.table.to_pylist()] == ["a", "multi\nline", "form\x0cfeed", "sep\u2028ara"]
    undecodable = next(b for b in res.bad if "UTF-8" in b["reason"])
    assert undecodable["offset"] == data.index(b"\xff") and undecodable["raw"] == "\\xff\\xfe,5,5"
    assert len(res.bad) == 2


def test_jsonl_splits_on_newlines_only_and_quarantines_undecodable_lines():
    data = '{"k":"a\u2028b","v":1,"x":1}\n'.encode() + b'{"k":"\xff","v":2}\n{"k":"c","v":"x"}\n'
    res = parse_jsonl(data, SCHEMA)
    assert [r["k"] for r in res.table.to_pylist()] == ["a\u2028b"]
    assert [(b["row"], b["offset"]) for b in res.bad] == [(2, data.index(b'{"k":"\xff')), (3, data.index(b'{"k":"c'))]


_field = st.text(alphabet=st.characters(codec="utf-8", exclude_characters="\r\x00"), max_size=12)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(_field, _field, _field), min_size=1, max_size=25))
def test_parser_agrees_with_pythons_csv_module(rows):
    """Property: any rows Python's csv module writes read back the same (empty field = null, as Spark's default)."""
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerows(rows)
    schema = pa.schema([("a", pa.string()), ("b", pa.string()), ("c", pa.string())])
    res = parse_csv(buf.getvalue().encode(), schema)
    expected = [tuple(v if v != "" else None for v in r) for r in csv.reader(io.StringIO(buf.getvalue()))]
    assert res.bad == []
    assert [(r["a"], r["b"], r["c"]) for r in res.table.to_pylist()] == expected


def test_file_format_validation():
    with pytest.raises(ConfigError, match="one character"):
        FileFormat("csv", delimiter=";;")
    with pytest.raises(ConfigError, match="valid choices: csv, json, parquet"):
        FileFormat("avro")


# -- item 4: exact file admission ---------------------------------------------------------------------------
class Clock:
    def __init__(self, t: float) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


def _conn(tmp_path, clock, **kw) -> FilesConnector:
    return FilesConnector(Manifest(str(tmp_path / "state" / "manifest.jsonl")), str(tmp_path / "in"), clock=clock, **kw)


def _touch(path, text: str, mtime: float, mode: str = "w") -> None:
    with open(path, mode) as f:
        f.write(text)
    os.utime(path, (mtime, mtime))


@pytest.mark.parametrize("name", [".a.csv", "_a.csv", "a.csv._COPYING_", "a.csv.tmp", "a.csv.crc", "a~"])
def test_temporary_and_hidden_names_are_ignored(name):
    assert ignored(name)
    assert not ignored("a.csv")


def test_file_written_in_place_is_admitted_only_when_stable_and_appends_become_new_datasets(tmp_path):
    (tmp_path / "in").mkdir()
    clock = Clock(1000.0)
    conn = _conn(tmp_path, clock, stable_seconds=0.5)
    path = str(tmp_path / "in" / "a.csv")
    _touch(path, "k1,1,1\n", 999.9)  # written 0.1 s ago: may still be growing
    assert conn.poll() == []
    clock.t = 1000.5
    (first,) = conn.poll()
    assert (first.start, first.bytes) == (0, 7)
    _touch(path, "k2,2,2\nk3,3,3\n", 1000.6, mode="a")  # rows appended after admission
    clock.t = 1000.7
    assert conn.poll() == []
    clock.t = 1001.2
    (second,) = conn.poll()
    assert (second.start, second.bytes, second.seq) == (7, 14, 1)
    rows = [parse_slice(FileSlice.of(r), SCHEMA, FileFormat()).table.to_pylist() for r in (first, second)]
    assert [[x["k"] for x in r] for r in rows] == [["k1"], ["k2", "k3"]]


def test_rename_from_a_temporary_name_is_admitted_once(tmp_path):
    (tmp_path / "in").mkdir()
    clock = Clock(2000.0)
    conn = _conn(tmp_path, clock, stable_seconds=0.5)
    tmp = str(tmp_path / "in" / "b.csv._COPYING_")
    _touch(tmp, "k,1,1\n", 1990.0)
    assert conn.poll() == []
    os.replace(tmp, str(tmp_path / "in" / "b.csv"))
    assert [os.path.basename(r.path) for r in conn.poll()] == ["b.csv"]
    assert conn.poll() == []


def test_rewritten_file_is_reported_not_reread_and_replay_of_changed_bytes_fails(tmp_path):
    (tmp_path / "in").mkdir()
    events: list[tuple[str, str]] = []
    conn = _conn(tmp_path, Clock(3000.0), stable_seconds=0, on_changed=lambda p, why: events.append((p, why)))
    path = str(tmp_path / "in" / "c.csv")
    _touch(path, "k,1,1\n", 2000.0)
    (ref,) = conn.poll()
    _touch(path, "q,9,9\nmore,1,1\n", 2001.0)  # rewritten in place, longer
    assert conn.poll() == []
    assert len(events) == 1 and "rewritten" in events[0][1]
    with pytest.raises(ConnectorError, match="changed after it was admitted"):
        parse_slice(FileSlice.of(ref), SCHEMA, FileFormat())


def test_fingerprint_covers_both_ends_and_length(tmp_path):
    p = tmp_path / "f"
    p.write_bytes(b"a" * 200_000)
    before = fingerprint(str(p), 0, 200_000)
    p.write_bytes(b"a" * 199_999 + b"b")
    assert fingerprint(str(p), 0, 200_000) != before


# -- items 6, 7, 8: crash-safe state ------------------------------------------------------------------------
def test_two_queries_on_one_directory_get_their_own_state_and_a_shared_one_is_locked(tmp_path):
    o = SourceOptions.parse({"path": str(tmp_path)})
    assert o.state_dir("q1") != o.state_dir("q2")
    lock = StateLock(o.state_dir("q1"))
    try:
        with pytest.raises(ConnectorError, match="in use by another running query"):
            StateLock(o.state_dir("q1"))
    finally:
        lock.release()
    StateLock(o.state_dir("q1")).release()  # free again once released


def test_torn_manifest_tail_is_cut_and_a_corrupt_middle_raises(tmp_path):
    path = tmp_path / "m.jsonl"
    m = Manifest(str(path))
    m.append([("/a", 1.0, 10, False), ("/b", 2.0, 20, False)])
    with open(path, "a") as f:
        f.write('{"seq": 2, "path": "/c", "arr')  # crash mid-write
    again = Manifest(str(path))
    assert [r.path for r in again.items] == ["/a", "/b"]
    again.append([("/c", 3.0, 5, False)])
    assert [r.seq for r in Manifest(str(path)).items] == [0, 1, 2]
    lines = path.read_text().splitlines()
    path.write_text("\n".join([lines[0], "garbage", lines[2]]) + "\n")
    with pytest.raises(ConnectorError, match="corrupt at record 2"):
        Manifest(str(path))


def test_quarantine_is_deduplicated_across_replays_and_restarts(tmp_path):
    bad = [{"seq": 0, "path": "/a", "row": 2, "offset": 8, "raw": "x", "reason": "r"}]
    q = Quarantine(str(tmp_path))
    assert q.add(bad) == 1 and q.add(bad) == 0
    assert Quarantine(str(tmp_path)).add(bad) == 0  # after a restart
    assert len(list(read_jsonl(str(tmp_path / "quarantine.jsonl")))) == 1


# -- item 9: validation at construction ---------------------------------------------------------------------
@pytest.mark.parametrize(
    ("opts", "match"),
    [
        ({"admission": "lmstreem"}, "valid choices: asap, fixed, lmstream"),
        ({"partitioner": "cam2"}, "unknown partitioner 'cam2'; valid choices: "),
        ({"connector": "generator", "generator": "nope"}, "valid choices: "),
        ({"connector": "generator", "generator": "linear_road", "traffic": "bursty"}, "constant, random, sinusoidal"),
        ({"delimiter": ";;"}, "one character"),
        ({"connector": "generator", "generator": "linear_road", "jitter": "-1"}, "jitter must be in"),
        ({"connector": "generator", "generator": "linear_road", "amplitude": "2"}, "amplitude must be in"),
        ({"jitter": "0.1"}, r"jitter \(generator connector\) do not apply to the files connector"),
        ({"numBlocks": "2.7"}, "numBlocks must be an integer"),
        ({"connector": "generator", "generator": "linear_road", "rate": "-500"}, r"rate must be in \[1, inf\]"),
        ({"fileFormat": "avro"}, "valid choices: csv, json, jsonl, parquet"),
        ({"maxBytesPerTrigger": "lots"}, "size in bytes"),
        ({"ignorePattern": "("}, "not a valid regular expression"),
        ({"partitionerParams": "oops"}, "name=value"),
    ],
)
def test_bad_options_fail_at_construction_naming_choices_or_range(tmp_path, opts, match):
    with pytest.raises(ConfigError, match=match):
        SourceOptions.parse({"path": str(tmp_path), **opts})


def test_read_limits_from_options(tmp_path):
    o = SourceOptions.parse({"path": str(tmp_path), "maxBytesPerTrigger": "1m", "maxDatasetsPerBatch": "3"})
    assert (o.max_bytes, o.max_files) == (1024 * 1024, 3)
    assert SourceOptions.parse({"path": str(tmp_path)}).max_bytes == 256 * 1024 * 1024  # a default cap


def test_group_by_bytes_is_contiguous_and_balanced():
    assert group_by_bytes([10, 10, 10, 10], 2) == [(0, 2), (2, 4)]
    assert group_by_bytes([100, 1, 1, 1], 2) == [(0, 1), (1, 4)]
    assert group_by_bytes([5], 4) == [(0, 1)]
    assert group_by_bytes([], 3) == []
    groups = group_by_bytes([3, 1, 4, 1, 5, 9, 2, 6], 3)
    assert groups[0][0] == 0 and groups[-1][1] == 8 and all(a < b for a, b in groups)
    assert json.dumps(groups)  # plain ints


def test_undecodable_bytes_in_a_malformed_row_are_quarantined_not_fatal():
    """pyarrow cannot hand a non-UTF-8 row to its invalid-row handler; such rows are set aside before it reads."""
    data = b"a,1,1\n\xff,bad\nb,2,2\n\xfe,3,3\nc,zz,1\n"
    res = parse_csv(data, SCHEMA)
    assert [r["k"] for r in res.table.to_pylist()] == ["a", "b"]
    assert [(b["row"], b["offset"], b["raw"]) for b in res.bad] == [
        (2, 6, "\\xff,bad"),
        (4, 18, "\\xfe,3,3"),
        (5, 24, "c,zz,1"),
    ]


def test_block_count_file_overrides_num_blocks_and_bad_files_keep_it(tmp_path):
    """Alg. 4's map tasks reach the source through ``blocksFile``; a missing or broken file is never fatal."""
    from adaptstream.spark.planner import read_block_count, write_block_count

    path = tmp_path / "map_tasks.json"
    assert read_block_count(None, 3) == 3
    assert read_block_count(str(path), 3) == 3  # not written yet
    write_block_count(str(path), 5, after_batch=7)
    assert read_block_count(str(path), 3) == 5
    assert json.loads(path.read_text()) == {"map_tasks": 5, "after_batch": 7}
    for bad in ("", "{", '{"map_tasks": 0}', '{"map_tasks": "x"}', '{"other": 2}', "[1]"):
        path.write_text(bad)
        assert read_block_count(str(path), 3) == 3, bad
