"""processAllAvailable under adaptstream (spark/drain.py): Spark's own call returns at the first trigger that finds
no new offset, which an adaptstream source reports while its policy holds data; the drain waits until the query
committed every dataset its sources recorded. A fake query stands in for Spark's here: its progress advances one
batch per wait, as a real one would."""

from __future__ import annotations

import json
import os

import pytest

from adaptstream.spark import drain
from adaptstream.spark.drain import DrainTimeout, positions, process_all_available


def _offset(seq: int, state: str | None) -> str:
    return json.dumps({"seq": seq, **({"state": state} if state else {}), "query": "q1"})


class FakeQuery:
    """Commits ``step`` datasets per awaitTermination call (a batch), up to the manifest's length."""

    name, id = "fake", "id-1"

    def __init__(self, state: str, recorded: int, step: int = 1, active: bool = True) -> None:
        self.state, self.step, self.isActive = state, step, active
        os.makedirs(state, exist_ok=True)
        with open(os.path.join(state, "manifest.jsonl"), "w") as f:
            f.writelines(json.dumps({"seq": i}) + "\n" for i in range(recorded))
        self.committed = 0
        self.spark_calls = self.waits = 0

    def processAllAvailable(self) -> None:  # returns at once, as while a source holds data
        self.spark_calls += 1

    @property
    def lastProgress(self) -> dict:
        # batch 0 (start-up) ends on the initial offset, which carries no state; the latest offset does
        end = _offset(self.committed, self.state if self.committed else None)
        return {"sources": [{"endOffset": end, "latestOffset": _offset(self.committed, self.state)}]}

    def awaitTermination(self, timeout: float | None = None) -> bool:
        self.waits += 1
        self.committed += self.step
        return False


def test_it_waits_until_every_recorded_dataset_is_committed(tmp_path):
    q = FakeQuery(str(tmp_path / "state"), recorded=5)
    process_all_available(q)
    assert q.committed == 5 and q.waits == 5 and q.spark_calls == 1


def test_a_query_caught_up_returns_after_spark_s_own_call(tmp_path):
    q = FakeQuery(str(tmp_path / "state"), recorded=0)
    process_all_available(q)
    assert q.waits == 0 and q.spark_calls == 1


def test_a_query_without_adaptstream_sources_is_left_to_spark(tmp_path):
    class Other(FakeQuery):
        @property
        def lastProgress(self) -> dict:
            return {"sources": [{"endOffset": '{"logOffset": 3}', "latestOffset": None}]}

    q = Other(str(tmp_path / "state"), recorded=4)
    process_all_available(q)
    assert q.waits == 0 and positions(q.lastProgress) == {}


def test_data_that_stays_held_past_the_timeout_is_a_clear_error(tmp_path):
    q = FakeQuery(str(tmp_path / "state"), recorded=3, step=0)
    with pytest.raises(DrainTimeout, match=r"query fake: 3 dataset\(s\) still held after 0 s"):
        process_all_available(q, timeout=0)


def test_a_stopped_query_returns_as_spark_s_does(tmp_path):
    q = FakeQuery(str(tmp_path / "state"), recorded=3, active=False)
    process_all_available(q)  # its own awaitTermination would raise a failure; a stopped one returns
    assert q.committed == 1  # the one awaitTermination() call


def test_install_is_idempotent_and_keeps_spark_s_call(monkeypatch):
    from pyspark.sql.streaming.query import StreamingQuery

    before = StreamingQuery.processAllAvailable  # patched already when another test registered adaptstream
    spark_own = drain._original or before
    monkeypatch.setattr(drain, "_original", None)
    StreamingQuery.processAllAvailable = spark_own
    try:
        drain.install()
        patched = StreamingQuery.processAllAvailable
        drain.install()
        assert drain._original is spark_own and StreamingQuery.processAllAvailable is patched is not spark_own
        assert "adaptstream" in patched.__doc__
    finally:
        StreamingQuery.processAllAvailable = before
