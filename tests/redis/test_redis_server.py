"""The test server itself: scripts/redis.sh starts a real redis-server on a free port and stops it by PID."""

from __future__ import annotations

import os


def test_server_answers_and_keeps_its_files_in_its_directory(redis_server):
    r = redis_server.client()
    assert r.ping()
    entry = r.xadd("test-server-stream", {"row": "a,1"})
    assert r.xrange("test-server-stream") == [(entry, {b"row": b"a,1"})]
    assert os.path.isdir(os.path.join(redis_server.dir, "appendonlydir"))


def test_restart_on_the_same_port_keeps_the_stream(own_redis_server):
    r = own_redis_server.client()
    ids = [r.xadd("s", {"row": f"k,{i}"}) for i in range(3)]
    pid = own_redis_server.pid
    own_redis_server.stop()
    assert not os.path.exists(f"/proc/{pid}")  # stopped: the daemon is reparented to init, which reaps it
    own_redis_server.start()
    assert [e for e, _ in own_redis_server.client().xrange("s")] == ids
