"""Recovery of every state file the source, the pane executor and the tuner keep (docs/source.md, "State files"):
a torn or damaged file either recovers (what it held is not needed for exact results) or stops the query with a
message naming the file and the fix (what it held decides which data is read)."""

from __future__ import annotations

import json
import os

import pytest

from adaptstream.connectors.base import Manifest, StateLock, append_jsonl, read_jsonl
from adaptstream.connectors.parsing import ParseResult
from adaptstream.connectors.ranges import read_part, write_part_result
from adaptstream.connectors.redis import read_start_file
from adaptstream.errors import ConnectorError, StateFileError
from adaptstream.spark.accounting import Quarantine
from adaptstream.spark.pane import elastic_snapshot, read_batch_meta
from adaptstream.spark.planner import read_block_count


def _entry(seq: int) -> dict:
    return {"seq": seq, "path": f"/in/{seq}.csv", "arrival": 1.0 + seq, "bytes": 10}


def test_a_torn_last_manifest_record_is_cut_and_a_damaged_one_elsewhere_stops(tmp_path):
    path = str(tmp_path / "manifest.jsonl")
    append_jsonl(path, [_entry(0), _entry(1)])
    with open(path, "a") as f:
        f.write('{"seq": 2, "pa')  # a crash mid-write
    assert len(Manifest(path)) == 2
    text = (tmp_path / "manifest.jsonl").read_text()
    assert len(Manifest(path)) == 2 and text.endswith("}\n")  # the torn bytes are gone
    lines = text.splitlines()
    with open(path, "w") as f:
        f.write(lines[0] + "\n" + "garbage\n" + lines[1] + "\n")
    with pytest.raises(ConnectorError, match="is corrupt at record 2"):
        Manifest(path)


def test_a_torn_quarantine_keeps_every_earlier_record_and_counts_each_once(tmp_path):
    q = Quarantine(str(tmp_path))
    bad = [{"seq": 0, "path": "/a", "row": 1, "offset": 4, "raw": "x", "reason": "r"}]
    assert q.add(bad) == 1
    with open(tmp_path / "quarantine.jsonl", "a") as f:
        f.write('{"seq": 1, "path": "/a", "ro')
    again = Quarantine(str(tmp_path))
    assert again.add(bad) == 0  # the first record survived and is still known
    assert again.add([{**bad[0], "offset": 9}]) == 1
    assert len(list(read_jsonl(str(tmp_path / "quarantine.jsonl")))) == 2


def test_part_files_are_rewritten_whole_and_a_missing_one_reads_as_none(tmp_path):
    import pyarrow as pa

    parts = str(tmp_path / "parts")
    assert read_part(parts, 3) is None  # the accountant warns and counts no rows for it (docs/source.md)
    write_part_result(parts, 3, ParseResult(pa.table({"v": [1, 2]})))
    write_part_result(parts, 3, ParseResult(pa.table({"v": [1, 2]})))  # a retried task: the same file, whole
    assert read_part(parts, 3) == {"seq": 3, "rows": 2, "bad": []}
    assert not [n for n in os.listdir(parts) if n.endswith(".tmp")]


@pytest.mark.parametrize("text", ["", "{", '{"start": 3}', "[]", "null"])
def test_a_damaged_redis_start_file_stops_with_the_fix(tmp_path, text):
    path = tmp_path / "redis.json"
    path.write_text(text)
    with pytest.raises(ConnectorError, match=r"redis\.json .* is damaged.*new checkpoint and statePath"):
        read_start_file(str(path))
    assert read_start_file(str(tmp_path / "none.json")) == {"start": {}, "before": {}}  # a first start


@pytest.mark.parametrize("text", ["", "{", '{"after": 4}', '{"after": 4, "state": 7}', "[]"])
def test_a_damaged_elasticity_snapshot_is_set_aside_and_elasticity_starts_fresh(tmp_path, text):
    path = tmp_path / "elasticity.json"
    path.write_text(text)
    with pytest.warns(UserWarning, match="elasticity starts fresh"):
        assert elastic_snapshot(str(path), 5) is None
    assert not path.exists() and (tmp_path / "elasticity.json.bad").read_text() == text


def test_the_elasticity_snapshot_resumes_the_batch_it_was_saved_for(tmp_path):
    path = tmp_path / "elasticity.json"
    path.write_text(json.dumps({"after": 4, "state": {"s": 1}, "prev": {"s": 0}}))
    assert elastic_snapshot(str(path), 5) == {"s": 1}  # the next batch
    assert elastic_snapshot(str(path), 4) == {"s": 0}  # batch 4 replayed: the state before it
    assert elastic_snapshot(str(path), 9) is None  # another run's file: nothing to resume


@pytest.mark.parametrize("text", ["", "{", '{"map_tasks": "x"}', '{"map_tasks": 0}', "[]"])
def test_a_damaged_blocks_file_keeps_the_configured_task_count(tmp_path, text):
    path = tmp_path / "map_tasks.json"
    path.write_text(text)
    assert read_block_count(str(path), 3) == 3
    assert read_block_count(str(tmp_path / "missing.json"), 3) == 3


def test_an_unwritable_state_directory_is_a_clear_error(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    with pytest.raises(ConnectorError, match=r"cannot use the source state directory .*file/state.*statePath"):
        StateLock(str(blocker / "state"))


_META = {"batch": 3, "max_t_through": 100, "wm": 90, "max_pane": 80, "rows": 5, "late": 0, "untimed": 0, "windows": 1}


@pytest.mark.parametrize("text", ["", "{", "[]", "null", '{"batch": 3}', "\x00\x01garbage"])
def test_a_damaged_pane_batch_record_stops_with_the_file_and_the_fix(tmp_path, text):
    (tmp_path / "3.json").write_text(text)
    with pytest.raises(StateFileError, match=r"3\.json is damaged .*watermark of batch 3.*new checkpoint"):
        read_batch_meta(str(tmp_path), 3)
    assert read_batch_meta(str(tmp_path), 4) is None  # a batch that never ran


def test_a_missing_pane_batch_record_between_others_stops_the_next_batch(tmp_path):
    from adaptstream.spark.pane import PaneExecutor, PaneSpec

    spec = PaneSpec(name="t", time_sql="0", data_sql="true", ts_fn="timestamp_seconds", window=10, slide=10,
                    delay=0, groups=("k",), out_groups=("k",), values=(), finals=())  # fmt: skip
    ex = PaneExecutor(None, "hash", 2, str(tmp_path / "state"), str(tmp_path / "out"), None, spec=spec)
    meta = tmp_path / "state" / "meta"
    (meta / "2.json").write_text(json.dumps({**_META, "batch": 2}))
    assert ex._previous_meta(3)["wm"] == 90
    assert ex._previous_meta(0) is None and ex._previous_meta(1) is None  # nothing before: a first batch
    (meta / "2.json").unlink()
    (meta / "1.json").write_text(json.dumps({**_META, "batch": 1}))
    with pytest.raises(StateFileError, match=r"2\.json is missing although earlier batches left theirs"):
        ex._previous_meta(3)
