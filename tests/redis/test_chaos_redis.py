"""bench chaos's Redis pieces against a real server: the stream it writes (one dataset per 0.1 s of the server's
clock) and a server restarted after kill -9 that still holds every acknowledged entry (append-only, fsync always)."""

from __future__ import annotations

import shutil

import pytest

from adaptstream_bench.chaos import RedisServer, write_stream

pytestmark = pytest.mark.redis


def test_written_groups_survive_a_kill_9_of_the_server():
    if shutil.which("redis-server") is None:
        pytest.skip("no redis-server on this machine (scripts/redis.sh install)")
    server = RedisServer()
    try:
        write_stream(server, "s", 3)
        r = server.client()
        ids = [int(i.split(b"-")[0]) // 100 for i, _ in r.xrange("s")]
        assert len(ids) == 150 and len(set(ids)) == 3  # three groups, each in its own tenth of a second
        port, pid = server.port, server.pid
        server.kill()
        server.start()
        assert (server.port, server.pid != pid) == (port, True)
        assert server.client().xlen("s") == 150  # nothing acknowledged was lost
        rows = {f[b"row"] for _, f in server.client().xrange("s")}
        assert rows == {f"k{i},{j}".encode() for i in range(3) for j in range(50)}
    finally:
        server.stop()
