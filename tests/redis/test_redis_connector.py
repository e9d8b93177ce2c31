"""The Redis Streams connector against a real redis-server (scripts/redis.sh): discovery, offsets, reads by exact
ID range, quarantine, loss detection, an unreachable or restarted server, the producer and the CLI's errors."""

from __future__ import annotations

import json
import uuid

import pyarrow as pa
import pytest

import adaptstream.spark.session
from adaptstream import cli
from adaptstream.connectors.base import Manifest
from adaptstream.connectors.redis import (
    EntryFormat,
    RedisConnector,
    check_reachable,
    id_key,
    parse_entries,
    parse_url,
    read_piece,
    redact,
)
from adaptstream.connectors.redis_produce import entries_of, produce
from adaptstream.connectors.traffic import build_traffic
from adaptstream.errors import ConfigError, ConnectorError
from adaptstream.spark.options import SourceOptions
from adaptstream.workloads import GENERATORS

SCHEMA = pa.schema([("k", pa.string()), ("v", pa.int32())])


def _stream() -> str:
    return f"s-{uuid.uuid4().hex[:8]}"


def _connector(server, tmp_path, streams: str, **kw) -> RedisConnector:
    addr = parse_url(f"{server.url}/{streams}")
    return RedisConnector(Manifest(str(tmp_path / "manifest.jsonl")), addr, str(tmp_path), **kw)


def _read(server, ref, fmt: EntryFormat | None = None):
    addr = parse_url(f"{server.url}/{ref.path}")
    return read_piece(
        server.client(),
        addr,
        ref.seq,
        ref.path,
        ref.first_id,
        ref.last_id,
        ref.entries,
        SCHEMA,
        fmt or EntryFormat(),
        5.0,
    )


def test_urls_and_options_are_checked():
    assert parse_url("redis://h:6379/a,b").streams == ("a", "b")
    for bad in ("redis://h/a", "redis://h:0/a", "redis://h:1/", "redis://h:1/a,a", "http://h:1/a"):
        with pytest.raises(ConfigError):
            parse_url(bad)
    opts = SourceOptions.parse({"path": "redis://127.0.0.1:6379/s", "statePath": "/tmp/x"})
    assert opts.connector == "redis"  # a redis:// path selects the connector
    with pytest.raises(ConfigError, match="statePath"):
        SourceOptions.parse({"path": "redis://127.0.0.1:6379/s"})
    with pytest.raises(ConfigError, match="entryFormat"):
        SourceOptions.parse({"path": "redis://127.0.0.1:6379/s", "statePath": "/x", "entryFormat": "xml"})


def test_datasets_are_closed_arrival_groups_recorded_by_id_range(redis_server, tmp_path):
    s = _stream()
    r = redis_server.client()
    # explicit IDs: group (second) 1000 holds 5 entries, second 1001 holds 3, second 1002 is still open
    ids = [f"1000{k:03d}-0" for k in (0, 100, 200, 300, 999)] + ["1001000-0", "1001500-0", "1001999-0"]
    ids.append("9999999999999-0")  # far in the future: its second cannot be closed by the clock yet
    for i, eid in enumerate(ids):
        r.xadd(s, {"row": f"k,{i}"}, id=eid)
    c = _connector(redis_server, tmp_path, s, max_piece=4)
    refs = c.poll()
    assert [(x.first_id, x.last_id, x.entries) for x in refs] == [
        (ids[0], ids[3], 4),  # a piece holds at most max_piece entries
        (ids[4], ids[4], 1),
        (ids[5], ids[7], 3),
    ]
    assert [x.seq for x in refs] == [0, 1, 2] and [x.bytes for x in refs] == [12, 3, 9]  # payload bytes ("k,0")
    assert c.ids_at(0) == {s: "0-0"} and c.ids_at(3) == {s: ids[7]}
    assert c.poll() == []  # the open second is not a dataset yet
    c.freeze()  # drain / AvailableNow: everything present now
    (last,) = c.poll()
    assert (last.first_id, last.last_id) == (ids[8], ids[8]) and c.caught_up()
    got = [_read(redis_server, ref).table.column("v").to_pylist() for ref in [*refs, last]]
    assert [v for part in got for v in part] == list(range(len(ids)))
    # a restart reads the manifest back and continues after it
    again = _connector(redis_server, tmp_path, s)
    assert again.cursor == {s: ids[8]} and again.poll() == []


def test_malformed_entries_are_quarantined_with_their_ids(redis_server):
    s = _stream()
    r = redis_server.client()
    good = r.xadd(s, {"row": "a,1"})
    wrong_type = r.xadd(s, {"row": "b,x"})
    too_many = r.xadd(s, {"row": "c,3,extra"})
    no_field = r.xadd(s, {"other": "d,4"})
    res = parse_entries(r.xrange(s), SCHEMA, EntryFormat())
    assert res.table.to_pylist() == [{"k": "a", "v": 1}]
    bad = {b["id"]: b for b in res.bad}
    assert set(bad) == {wrong_type.decode(), too_many.decode(), no_field.decode()}
    assert bad[wrong_type.decode()]["raw"] == "b,x" and "int32" in bad[wrong_type.decode()]["reason"]
    assert json.loads(bad[no_field.decode()]["raw"]) == {"other": "d,4"}
    assert good.decode() not in bad
    # one field per column: missing fields are null, values that do not convert are quarantined
    f = _stream()
    r.xadd(f, {"k": "x", "v": "7"})
    r.xadd(f, {"k": "y"})
    oops = r.xadd(f, {"k": "z", "v": "seven"})
    res = parse_entries(r.xrange(f), SCHEMA, EntryFormat("fields"))
    assert res.table.to_pylist() == [{"k": "x", "v": 7}, {"k": "y", "v": None}]
    assert [b["id"] for b in res.bad] == [oops.decode()]


def test_entries_trimmed_above_the_committed_offset_are_a_clear_error(redis_server, tmp_path):
    s = _stream()
    r = redis_server.client()
    ids = [r.xadd(s, {"row": f"k,{i}"}).decode() for i in range(10)]
    c = _connector(redis_server, tmp_path, s)
    c.freeze()
    (ref,) = c.poll()
    c.check_not_lost(0)  # nothing deleted yet
    r.xtrim(s, minid=ids[4], approximate=False)  # entries 0..3 removed before the query committed them
    c.poll()
    with pytest.raises(ConnectorError, match=rf"IDs from {ids[0]} up to {ids[4]} \(excluded\)"):
        c.check_not_lost(0)
    c.check_not_lost(1)  # trimmed at or below the committed offset is fine (the trim option does that)
    with pytest.raises(ConnectorError, match=rf"holds 6 of the 10 entries in the ID range {ids[0]}\.\.{ids[9]}"):
        _read(redis_server, ref)


def test_entries_removed_before_the_query_saw_them_are_a_clear_error(redis_server, tmp_path):
    s = _stream()
    r = redis_server.client()
    r.xadd(s, {"row": "old,0"}, id="5-0")
    r.xdel(s, "5-0")  # removed before the query started: not this query's
    r.xadd(s, {"row": "k,1"}, id="1000000-0")
    c = _connector(redis_server, tmp_path, s)
    assert [x.entries for x in c.poll()] == [1]
    c.check_not_lost(0)
    for i in range(3):
        r.xadd(s, {"row": f"k,{i + 2}"}, id=f"1001{i:03d}-0")
    r.xadd(s, {"row": "k,9"}, id="1002000-0")
    r.xtrim(s, minid="1002000-0", approximate=False)  # three entries gone before any poll saw them
    assert [x.first_id for x in c.poll()] == ["1002000-0"]
    with pytest.raises(ConnectorError, match=r"3 entries in the ID range \(1000000-0, 1002000-0\)"):
        c.check_not_lost(1)


def test_trim_removes_only_committed_entries(redis_server, tmp_path):
    s = _stream()
    r = redis_server.client()
    ids = [r.xadd(s, {"row": f"k,{i}"}).decode() for i in range(6)]
    c = _connector(redis_server, tmp_path, s)
    c.trim({s: ids[2]})
    assert [e.decode() for e, _ in r.xrange(s)] == ids[3:]


def test_unreachable_server_at_start_names_host_and_port():
    with pytest.raises(ConnectorError, match=r"cannot reach Redis at 127\.0\.0\.1:1 "):
        check_reachable(parse_url("redis://127.0.0.1:1/s"))


def test_cli_run_and_produce_against_an_unreachable_server_fail_in_one_line(monkeypatch, capsys):
    def refuse(*args, **kwargs):
        raise AssertionError("Spark started for a run that must fail before it")

    monkeypatch.setattr(adaptstream.spark.session, "build_spark", refuse)
    for args in (("run", "--input", "redis://127.0.0.1:1/s"), ("produce", "--to", "redis://127.0.0.1:1/s")):
        with pytest.raises(SystemExit) as exc:
            cli.main(list(args))
        out = capsys.readouterr()
        text = out.out + out.err
        assert exc.value.code == 1 and "127.0.0.1:1" in text and "Traceback" not in text
    with pytest.raises(SystemExit) as exc:
        cli.main(["run", "--input", "redis://nohost/s"])
    assert exc.value.code == 2 and "HOST:PORT[/DB]/STREAM" in capsys.readouterr().err


def test_server_down_then_back_waits_then_fails_after_the_timeout_and_loses_nothing(own_redis_server, tmp_path):
    s = _stream()
    r = own_redis_server.client()
    ids = [r.xadd(s, {"row": f"k,{i}"}, id=f"1000{i:03d}-0").decode() for i in range(5)]
    now = [1e9]
    c = _connector(own_redis_server, tmp_path, s, timeout=5.0, clock=lambda: now[0])
    first = c.poll()
    own_redis_server.stop()
    assert c.poll() == []  # unreachable: the query waits (no new batch) ...
    now[0] += 4.0
    assert c.poll() == []
    own_redis_server.start()  # ... and resumes once it is back (same port and data directory)
    r = own_redis_server.client()
    more = [r.xadd(s, {"row": f"k,{i}"}, id=f"1001{i:03d}-0").decode() for i in range(5, 8)]
    c.freeze()
    rest = c.poll()
    got = [v for ref in first + rest for v in _read(own_redis_server, ref).table.column("v").to_pylist()]
    assert got == list(range(8)) and c.ids_at(len(c.manifest)) == {s: more[-1]}
    assert ids[0] == first[0].first_id
    own_redis_server.stop()
    c.poll()
    now[0] += 6.0  # longer than redisTimeout
    with pytest.raises(ConnectorError, match=r"unreachable for 5 s \(option redisTimeout\)"):
        c.poll()


def test_producer_writes_the_generator_rows_with_its_traffic_shape(redis_server):
    s = _stream()
    gen = GENERATORS.get("linear_road")(seed=3).build()
    shape = build_traffic("sinusoidal", 200, amplitude=0.5, period=4)
    stats = produce(parse_url(f"{redis_server.url}/{s}"), 4, lambda k: gen.generate(k, shape.rows_at(k)), pace=False)
    expected = [shape.rows_at(k) for k in range(4)]
    assert stats.entries == sum(expected) == redis_server.client().xlen(s)
    again = GENERATORS.get("linear_road")(seed=3).build()
    lines = [e["row"] for k in range(4) for e in entries_of(again.generate(k, expected[k]))]
    assert [f[b"row"] for _, f in redis_server.client().xrange(s)] == lines
    ms = [id_key(e)[0] for e, _ in redis_server.client().xrange(s)]
    assert ms == sorted(ms)


def test_paced_producer_spreads_each_second_over_that_second(redis_server):
    s = _stream()
    t = [100.0]
    slept: list[float] = []

    def sleep(d: float) -> None:
        slept.append(d)
        t[0] += d

    gen = GENERATORS.get("task_events")(seed=1).build()
    stats = produce(
        parse_url(f"{redis_server.url}/{s}"),
        2,
        lambda k: gen.generate(k, 50),
        slices=5,
        clock=lambda: t[0],
        sleep=sleep,
    )
    assert stats.entries == 100 and redis_server.client().xlen(s) == 100
    assert t[0] >= 101.8 and len(slept) == 9  # slices at 0.2 s steps over two seconds (the first is due at once)


# -- credentials (#57 item 5) ---------------------------------------------------------------------------------------
def test_the_url_grammar_takes_user_password_database_and_tls(monkeypatch):
    monkeypatch.delenv("ADAPTSTREAM_REDIS_PASSWORD", raising=False)
    a = parse_url("redis://reader:p%40ss%2Fw@127.0.0.1:6380/3/s1,s2")
    assert (a.user, a.password, a.db, a.tls, a.streams) == ("reader", "p@ss/w", 3, False, ("s1", "s2"))
    assert a.where == "127.0.0.1:6380/3" and a.url == "redis://reader:***@127.0.0.1:6380/3/s1,s2"
    assert "p@ss" not in repr(a) and "p@ss" not in a.url
    assert parse_url("rediss://:only-pw@h:1/s").tls and parse_url("rediss://:only-pw@h:1/s").password == "only-pw"
    plain = parse_url("redis://h:1/s")
    assert (plain.user, plain.password, plain.db) == (None, None, 0)
    monkeypatch.setenv("ADAPTSTREAM_REDIS_PASSWORD", "from-env")
    assert parse_url("redis://h:1/s").password == "from-env"  # the environment, when the URL and options give none
    assert parse_url("redis://u:from-url@h:1/s").password == "from-url"
    assert parse_url("redis://u:from-url@h:1/s", user="v", password="from-opt").password == "from-opt"
    with pytest.raises(ConfigError) as bad:
        parse_url("redis://u:topsecret@nohost/s")
    assert "topsecret" not in str(bad.value) and "u:***@" in str(bad.value)
    assert redact("--input redis://u:topsecret@h:1/s") == "--input redis://u:***@h:1/s"


def test_the_password_options_never_show_in_the_options_repr(tmp_path):
    opts = SourceOptions.parse(
        {
            "path": "redis://127.0.0.1:6379/s",
            "statePath": str(tmp_path),
            "redisUser": "reader",
            "redisPassword": "opt-secret",
        }
    )
    assert opts.conn.address().password == "opt-secret" and opts.conn.address().user == "reader"
    assert "opt-secret" not in repr(opts) and "opt-secret" not in repr(opts.conn.address())


@pytest.fixture
def locked_server(own_redis_server):
    """A real redis-server that requires a password, with an ACL user 'reader' of its own."""
    r = own_redis_server.client()
    r.execute_command("ACL", "SETUSER", "reader", "on", ">reader-pw", "~*", "+@all")
    r.config_set("requirepass", "default-pw")
    own_redis_server.client = lambda: __import__("redis").Redis(  # type: ignore[method-assign]
        host="127.0.0.1", port=own_redis_server.port, password="default-pw"
    )
    return own_redis_server


def test_a_password_server_reads_with_url_or_option_credentials_and_refuses_wrong_ones(locked_server, tmp_path):
    s = _stream()
    locked_server.client().xadd(s, {"row": "a,1"})
    base = f"127.0.0.1:{locked_server.port}/{s}"
    for addr in (parse_url(f"redis://reader:reader-pw@{base}"), parse_url(f"redis://{base}", "reader", "reader-pw")):
        check_reachable(addr)
        c = RedisConnector(Manifest(str(tmp_path / f"m-{addr.user}-{id(addr)}.jsonl")), addr, str(tmp_path))
        c.start()
        c.stop()
    check_reachable(parse_url(f"redis://:default-pw@{base}"))  # the default user's password
    for url in (f"redis://reader:wrong-pw@{base}", f"redis://{base}", f"redis://nobody:reader-pw@{base}"):
        with pytest.raises(ConnectorError) as refused:
            check_reachable(parse_url(url))
        text = str(refused.value)
        assert "refused" in text and "\n" not in text and "reader-pw" not in text and "wrong-pw" not in text


def test_cli_run_with_a_wrong_password_is_one_line_exit_1(locked_server, monkeypatch, capsys):
    def refuse(*args, **kwargs):
        raise AssertionError("Spark started for a run that must fail before it")

    monkeypatch.setattr(adaptstream.spark.session, "build_spark", refuse)
    with pytest.raises(SystemExit) as exc:
        cli.main(["run", "--input", f"redis://reader:wrong-pw@127.0.0.1:{locked_server.port}/s"])
    out = capsys.readouterr()
    text = out.out + out.err
    assert exc.value.code == 1 and "refused user 'reader'" in text
    assert "wrong-pw" not in text and "Traceback" not in text
