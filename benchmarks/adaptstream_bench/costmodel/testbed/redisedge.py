"""Cross-host edges of a placed query: a Redis stream per edge, written and read by EXECUTORS.

The upstream piece's executors XADD chunks of rows (JSON, up to CHUNK rows per entry) from their host's
namespace, so the bytes leave through that host's veth (tbf); the downstream piece reads them with this
streaming data source, whose `read()` runs in the downstream host's executor (the bytes enter through that
host's veth). The driver only asks Redis for the last entry id (planning) and trims consumed entries.
Redis plays the broker (Kafka in Costream); it runs on the bridge, unconfined.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition

SCHEMA = "ev DOUBLE, ing DOUBLE, k LONG, v LONG, pl STRING"
CHUNK = 500


class EdgePartition(InputPartition):
    def __init__(self, start: str, end: str) -> None:
        self.start, self.end = start, end


class RedisEdgeSource(DataSource):
    """`spark.readStream.format("tbredis").option("host",..).option("port",..).option("key",..).load()`"""

    @classmethod
    def name(cls) -> str:
        return "tbredis"

    def schema(self) -> str:
        return SCHEMA

    def streamReader(self, schema: Any) -> DataSourceStreamReader:
        return _Reader(self.options)


def _client(options: Any) -> Any:
    import redis

    return redis.Redis(host=options["host"], port=int(options["port"]), socket_timeout=60)


class _Reader(DataSourceStreamReader):
    def __init__(self, options: Any) -> None:
        self.options = dict(options)
        self.key = self.options["key"]
        self._r: Any = None

    def _redis(self) -> Any:
        if self._r is None:
            self._r = _client(self.options)
        return self._r

    def initialOffset(self) -> dict:
        return {"id": "0-0"}

    def latestOffset(self, start: dict, limit: Any) -> dict:
        last = self._redis().xrevrange(self.key, count=1)
        return {"id": last[0][0].decode() if last else start["id"]}

    def partitions(self, start: dict, end: dict) -> list[InputPartition]:
        return [] if start["id"] == end["id"] else [EdgePartition(start["id"], end["id"])]

    def read(self, partition: InputPartition) -> Iterator[tuple]:
        r = _client(self.options)
        assert isinstance(partition, EdgePartition)
        for _id, fields in r.xrange(self.key, min="(" + partition.start, max=partition.end):
            for row in json.loads(fields[b"b"]):
                yield tuple(row)

    def commit(self, end: dict) -> None:
        # the end entry itself is consumed too: what stays in the stream is unread, so its oldest entry's age is
        # the edge's lag (`edge_lag_s`)
        self._redis().xtrim(self.key, minid=next_id(end["id"]))


def next_id(entry_id: str) -> str:
    """The smallest stream id after `entry_id` ("ms-seq")."""
    ms, _, seq = entry_id.partition("-")
    return f"{ms}-{int(seq or 0) + 1}"


def push_partition(host: str, port: int, key: str) -> Any:
    """A foreachPartition function: XADD the partition's rows in chunks (runs in the executor)."""

    def push(rows: Iterator[Any]) -> None:
        import redis

        r = redis.Redis(host=host, port=port, socket_timeout=60)
        pipe = r.pipeline(transaction=False)
        buf: list[list[Any]] = []
        for row in rows:
            buf.append([row.ev, row.ing, row.k, row.v, row.pl])
            if len(buf) >= CHUNK:
                pipe.xadd(key, {"b": json.dumps(buf)})
                buf = []
        if buf:
            pipe.xadd(key, {"b": json.dumps(buf)})
        pipe.execute()

    return push


def edge_lag_s(rc: Any, key: str, now: float) -> float:
    """Age in seconds of the edge's oldest unread entry (an id starts with its XADD time in ms; `commit` trims the
    consumed ones); 0 when the consumer has read everything."""
    first = rc.xrange(key, count=1)
    if not first:
        return 0.0
    ms = int(first[0][0].decode().partition("-")[0])
    return max(0.0, now - ms / 1000.0)
