"""The controller and its client over real loopback sockets, without Spark: grants, reports, an unreachable
controller (the source runs unscheduled at once, with a warning) and a controller restart (re-registration)."""

from __future__ import annotations

import logging
import threading
import time

import pytest

from adaptstream.control import Controller, ControllerClient
from adaptstream.control.controller import free_port
from adaptstream.errors import ConfigError
from adaptstream.scheduling import build_scheduler


def _client(ctl: Controller, *args, **kwargs) -> ControllerClient:
    """A source's client of ``ctl``, with the secret the application hands its sources."""
    return ControllerClient(ctl.address, *args, secret=ctl.secret, **kwargs)


@pytest.fixture
def controller():
    ctl = Controller(build_scheduler("fcfs", slots=1, cycle=1e-6)).start()
    try:
        yield ctl
    finally:
        ctl.stop()


def test_two_sources_share_one_slot(controller):
    a = _client(controller, "a", {"main": (2.0, 0.5)}, retry=0.0)
    b = _client(controller, "b", retry=0.0)
    assert a.poll(True, 100, oldest=1.0) is True
    assert b.poll(True, 100, oldest=0.5) is False  # a holds the slot
    a.report_done(5, 100, 0.3)
    a.report_progress("main", 4, 10.0, 9.5, 0.0)
    assert a.poll(False) is False  # the completion travels with the next request
    assert b.poll(True, 100, oldest=0.5) is True
    stats = controller.stats()
    assert stats["queries"] == ["a", "b"] and stats["grants"] == 2 and stats["refusals"] == 1
    assert controller.policy.queries["a"].batches == 1
    a.close()
    b.close()
    assert controller.policy.queries == {} or set(controller.policy.queries) <= {"b"}


def test_an_idle_source_sends_nothing(controller):
    c = _client(controller, "idle", retry=0.0)
    assert c.poll(False) is False
    assert controller.requests == 0


def test_unreachable_controller_grants_at_once_and_warns_once(caplog):
    c = ControllerClient(f"127.0.0.1:{free_port()}", "q", timeout=0.2, retry=60.0)
    with caplog.at_level(logging.WARNING, logger="adaptstream.control"):
        t0 = time.monotonic()
        assert all(c.poll(True, 10) for _ in range(50))
        assert time.monotonic() - t0 < 2.0  # one failed connect, then no tries until the retry time
    warnings = [r for r in caplog.records if "unreachable" in r.getMessage()]
    assert len(warnings) == 1 and "runs unscheduled" in warnings[0].getMessage()
    assert c.unscheduled_polls == 50


def test_controller_restart_the_source_registers_again(caplog):
    port = free_port()
    ctl = Controller(build_scheduler("rr"), port=port).start()
    c = _client(ctl, "q", {"main": (1.0, 0.0)}, retry=0.0)
    assert c.poll(True, 5) is True
    ctl.stop()
    with caplog.at_level(logging.WARNING, logger="adaptstream.control"):
        assert c.poll(True, 5) is True  # the connection broke: unscheduled, not stuck
    ctl2 = Controller(build_scheduler("rr"), port=port, secret=ctl.secret).start()
    try:
        assert c.poll(True, 5) is True
        assert "q" in ctl2.policy.queries and "main" in ctl2.policy.queries["q"].streams
        assert any("is back" in r.getMessage() for r in caplog.records)
        # the batch it cut while the controller was down is told to the new one, once
        assert ctl2.stats()["per_query"]["q"] == {"grants": 1, "holds": 0, "unscheduled": 1}
        assert c.poll(True, 5) is True
        assert ctl2.stats()["per_query"]["q"]["unscheduled"] == 1
    finally:
        c.close()
        ctl2.stop()


def test_registrations_are_remembered_after_bye_and_bounded(controller, monkeypatch):
    c = _client(controller, "q", {"main": (1.0, 0.0)}, retry=0.0)
    assert c.poll(True, 1) is True
    c.close()  # sends bye: the policy forgets the query, the controller's record keeps it
    assert "q" not in controller.policy.queries
    assert controller.registrations["q"] == {"count": 1, "streams": ["main"]}
    c2 = _client(controller, "q", retry=0.0)
    assert c2.poll(True, 1) is True
    assert controller.registrations["q"] == {"count": 2, "streams": []}
    assert controller.stats()["registrations"] == {"q": 2}
    c2.close()
    monkeypatch.setattr("adaptstream.control.controller.MAX_REMEMBERED", 3)
    for name in ("a", "b", "c"):
        controller.handle({"op": "register", "query": name, "streams": {}})
    assert list(controller.registrations) == ["a", "b", "c"]  # q, registered longest ago, forgotten


def test_bad_requests_get_an_error_reply_not_a_dead_server(controller):
    assert controller.handle({"op": "nope"})["ok"] is False
    assert controller.handle({"op": "poll"})["ok"] is False  # no query
    c = _client(controller, "q", retry=0.0)
    assert c.poll(True, 1) is True


def test_bad_address_is_a_config_error():
    with pytest.raises(ConfigError, match=r"127\.0\.0\.1:PORT"):
        ControllerClient("localhost", "q")


def test_a_refused_source_waits_one_cycle_before_asking_again():
    ctl = Controller(build_scheduler("fcfs", slots=1, cycle=60.0)).start()
    try:
        a = _client(ctl, "a", retry=0.0)
        b = _client(ctl, "b", retry=0.0)
        assert a.poll(True, 1) is True
        assert b.poll(True, 1) is False
        before = ctl.requests
        assert not any(b.poll(True, 1) for _ in range(20))  # answered locally within the cycle
        assert ctl.requests == before
    finally:
        ctl.stop()


def test_sink_output_reports_reach_the_policy_as_measured_selectivity(controller):
    controller.report_output("q", 40)
    reply = controller.handle({"op": "poll", "query": "q", "done": {"end": 1, "rows": 200, "seconds": 0.1}})
    assert reply["ok"]
    assert controller.stats()["selectivity"] == {"q": pytest.approx(0.2)}
    assert not controller.handle({"op": "output", "query": "q", "rows": -3})["ok"]  # an error reply, no crash


def _poll_in_thread(client, *args, **kwargs):
    out: list[bool] = []
    t = threading.Thread(target=lambda: out.append(client.poll(*args, **kwargs)), daemon=True)
    t.start()
    return t, out


def _until(cond, limit: float = 10.0) -> None:
    end = time.monotonic() + limit
    while not cond():  # polls a condition; never a fixed sleep standing in for synchronisation
        assert time.monotonic() < end, "condition not reached"
        time.sleep(0.001)


def test_a_waiting_poll_is_granted_the_moment_a_completion_frees_the_slot():
    """Long-poll: the refused source is answered when the slot frees, not at its next poll a cycle later."""
    ctl = Controller(build_scheduler("fcfs", slots=1, cycle=30.0), max_wait=20.0).start()
    try:
        a = _client(ctl, "a", retry=0.0, timeout=30.0)
        b = _client(ctl, "b", retry=0.0, timeout=30.0)
        assert a.poll(True, 10, oldest=1.0) is True
        t, out = _poll_in_thread(b, True, 10, oldest=2.0)
        _until(lambda: ctl.waiting == 1)  # b waits at the controller
        t0 = time.monotonic()
        a.report_done(3, 10, 0.2)
        assert a.poll(False) is False  # the completion frees the slot
        t.join(15.0)
        assert out == [True] and time.monotonic() - t0 < 15.0
        assert ctl.woken_grants == 1 and ctl.grants == 2 and ctl.refusals == 0
    finally:
        ctl.stop()


def test_the_poll_right_after_a_completion_is_answered_at_once():
    """Spark asks latestOffset before it runs the no-data batch that emits a closed window: that poll must not
    wait, even when refused; the slot goes to the query first in order, which is waiting."""
    ctl = Controller(build_scheduler("fcfs", slots=1, cycle=30.0), max_wait=20.0).start()
    try:
        a = _client(ctl, "a", retry=0.0, timeout=30.0)
        b = _client(ctl, "b", retry=0.0, timeout=30.0)
        assert a.poll(True, 10, oldest=1.0) is True
        t, out = _poll_in_thread(b, True, 10, oldest=0.5)  # b's data is older: first once the slot frees
        _until(lambda: ctl.waiting == 1)
        a.report_done(3, 10, 0.2)
        t0 = time.monotonic()
        assert a.poll(True, 10, oldest=1.0) is False  # refused, not held at the controller
        assert time.monotonic() - t0 < 10.0
        t.join(15.0)
        assert out == [True]
    finally:
        ctl.stop()


def test_longpoll_off_answers_a_refusal_at_once_with_a_cycle_to_wait():
    ctl = Controller(build_scheduler("fcfs", slots=1, cycle=30.0, longpoll=False), max_wait=20.0).start()
    try:
        assert ctl.handle({"op": "poll", "query": "a", "want": True, "rows": 1})["grant"] is True
        t0 = time.monotonic()
        reply = ctl.handle({"op": "poll", "query": "b", "want": True, "rows": 1})
        assert reply["grant"] is False and reply["retry_in"] == 30.0 and time.monotonic() - t0 < 10.0
        assert ctl.waiting == 0
    finally:
        ctl.stop()


def test_stopping_the_controller_releases_a_waiting_poll():
    ctl = Controller(build_scheduler("fcfs", slots=1, cycle=30.0), max_wait=20.0).start()
    a = _client(ctl, "a", retry=60.0, timeout=30.0)
    b = _client(ctl, "b", retry=60.0, timeout=30.0)
    assert a.poll(True, 1) is True
    t, out = _poll_in_thread(b, True, 1)
    _until(lambda: ctl.waiting == 1)
    ctl.stop()
    t.join(15.0)
    assert not t.is_alive() and len(out) == 1  # answered (refused, or unscheduled once the connection closed)


# -- a controller only its own application can steer (#57) ----------------------------------------------------------
def _raw(ctl: Controller, *lines: bytes) -> list[dict | None]:
    """Send raw lines on a fresh connection; the replies, None where the controller closed the connection."""
    import json
    import socket

    out: list[dict | None] = []
    with socket.create_connection(("127.0.0.1", ctl.port), timeout=5.0) as s:
        f = s.makefile("rb")
        for line in lines:
            try:
                s.sendall(line + b"\n")
                reply = f.readline()
            except OSError:
                reply = b""
            out.append(json.loads(reply) if reply else None)
    return out


def _hello(ctl: Controller) -> bytes:
    import json

    return json.dumps({"op": "hello", "secret": ctl.secret}).encode()


def _decisions(ctl: Controller) -> tuple:
    return (sorted(ctl.policy.queries), ctl.policy.decisions, ctl.grants, ctl.refusals, dict(ctl.registrations))


def test_a_connection_without_the_secret_changes_no_decision(controller):
    a = _client(controller, "a", {"main": (2.0, 0.5)}, retry=0.0)
    assert a.poll(True, 1) is True
    before = _decisions(controller)
    register = b'{"op": "register", "query": "intruder", "streams": {}}'
    replies = _raw(controller, register, b'{"op": "poll", "query": "a", "want": true}')
    assert replies[0]["ok"] is False and "not authenticated" in replies[0]["error"]
    assert replies[1] is None  # the connection is closed after a refused first request
    wrong = _raw(controller, b'{"op": "hello", "secret": "guess"}', register)
    assert wrong[0]["ok"] is False and wrong[1] is None
    assert _decisions(controller) == before and controller.stats()["rejected"] == 2
    intruder = ControllerClient(controller.address, "intruder", timeout=0.5, retry=60.0)  # no secret
    assert intruder.poll(True, 1) is True  # runs unscheduled, as with an unreachable controller
    assert "intruder" not in controller.policy.queries and _decisions(controller) == before


def test_malformed_messages_get_one_line_errors_and_change_no_decision(controller):
    a = _client(controller, "a", {"main": (2.0, 0.5)}, retry=0.0)
    assert a.poll(True, 1) is True
    before = _decisions(controller)
    hello = _hello(controller)
    bad = [
        b"[1, 2, 3]",  # JSON, not an object
        b'"just a string"',
        b'{"op": "poll", "query": "a", "want": true, "rows": "many"}',
        b'{"op": "poll", "query": "a", "want": "yes"}',
        b'{"op": "register", "query": "x", "streams": {"main": [1, "late"]}}',
        b'{"op": "poll", "query": "a", "done": {"end": -1, "rows": 3, "seconds": 0.1}}',
        b'{"op": "poll", "query": "a", "progress": [{"stream": "main", "seq": 1}]}',
        b'{"op": "output", "query": "a", "rows": 1.5}',
        b'{"op": "register", "query": ""}',
        b'{"op": "shutdown"}',
    ]
    replies = _raw(controller, hello, *bad, b'{"op": "stats"}')
    assert replies[0] == {"ok": True}
    for line, reply in zip(bad, replies[1:-1], strict=True):
        assert reply["ok"] is False and "\n" not in reply["error"], line
        assert "Traceback" not in reply["error"] and "unsupported operand" not in reply["error"], line
    assert replies[-1]["ok"] is True  # the same connection still served: no handler died
    assert _decisions(controller) == before
    torn = _raw(controller, hello, b"{not json")
    assert torn[1]["ok"] is False and "bad request" in torn[1]["error"]
    assert _decisions(controller) == before


def test_registrations_are_bounded_and_expire_when_a_query_stops_talking(monkeypatch):
    from adaptstream.control import controller as mod
    from adaptstream.policy import ManualClock

    clock = ManualClock(1000.0)
    ctl = Controller(build_scheduler("fcfs", slots=1, cycle=1e-6), clock=clock, expire=60.0)
    monkeypatch.setattr(mod, "MAX_LIVE", 3)
    for q in ("a", "b", "c"):
        assert ctl.handle({"op": "register", "query": q, "streams": {}})["ok"]
    full = ctl.handle({"op": "register", "query": "d", "streams": {}})
    assert full["ok"] is False and "too many queries" in full["error"]
    assert ctl.handle({"op": "poll", "query": "e", "want": True})["ok"] is False
    clock.advance(30.0)
    ctl.handle({"op": "poll", "query": "a", "want": False})  # a is alive, b and c fall silent
    clock.advance(40.0)
    assert ctl.handle({"op": "register", "query": "d", "streams": {}})["ok"]  # b and c expired: room again
    assert sorted(ctl.policy.queries) == ["a", "d"]
    reply = ctl.handle({"op": "poll", "query": "b", "want": False})
    assert reply.get("reregister") is True  # b's source is told to register again (with its streams)


def test_an_expired_query_registers_again_with_its_streams():
    from adaptstream.policy import ManualClock

    clock = ManualClock(1000.0)
    ctl = Controller(build_scheduler("klink"), clock=clock, expire=60.0).start()
    try:
        c = _client(ctl, "q", {"main": (10.0, 2.0)}, retry=0.0)
        assert c.poll(True, 5) is True
        clock.advance(120.0)
        ctl.handle({"op": "stats"})  # any request sweeps: q is forgotten
        assert "q" not in ctl.policy.queries
        c.poll(True, 5)
        assert "main" in ctl.policy.queries["q"].streams
    finally:
        ctl.stop()


def test_the_connection_count_is_bounded(monkeypatch):
    from adaptstream.control import controller as mod

    monkeypatch.setattr(mod, "MAX_CONNECTIONS", 2)
    ctl = Controller(build_scheduler("rr")).start()
    try:
        a, b = _client(ctl, "a", retry=0.0), _client(ctl, "b", retry=0.0)
        a.poll(True, 1)
        b.poll(True, 1)
        third = _raw(ctl, _hello(ctl))
        assert third[0]["ok"] is False and "too many connections" in third[0]["error"]
        assert sorted(ctl.policy.queries) == ["a", "b"]
    finally:
        ctl.stop()


def test_the_secret_never_appears_in_the_source_options_repr():
    from adaptstream.spark.options import SourceOptions

    opts = SourceOptions.parse({"path": "/tmp/x", "controller": "127.0.0.1:9", "controllerSecret": "s3cr3t-value"})
    assert opts.controller_secret == "s3cr3t-value" and "s3cr3t-value" not in repr(opts)


# -- fuzzing: no message makes the controller raise or changes a decision it should not -----------------------------
_json = __import__("hypothesis.strategies", fromlist=["recursive"])


def _json_values():
    st = _json
    leaves = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8)
    return st.recursive(leaves, lambda c: st.lists(c, max_size=4) | st.dictionaries(st.text(max_size=6), c, max_size=4))


def _messages():
    st = _json
    ops = st.sampled_from(["register", "poll", "output", "bye", "stats", "hello", "nope"])
    fields = st.dictionaries(
        st.sampled_from(["query", "want", "rows", "oldest", "progress", "done", "streams", "secret"]),
        _json_values(),
        max_size=6,
    )
    return st.one_of(_json_values(), st.builds(lambda op, f: {"op": op, **f}, ops, fields))


def test_fuzzed_messages_never_raise_and_invalid_ones_change_nothing():
    from hypothesis import given, settings

    from adaptstream.control.messages import check

    ctl = Controller(build_scheduler("klink"))

    @settings(max_examples=400, deadline=None)
    @given(_messages())
    def one(msg):
        before = _decisions(ctl)
        reply = ctl.handle(msg)  # never raises
        assert isinstance(reply, dict) and isinstance(reply.get("ok"), bool)
        if check(msg) is not None:
            assert reply["ok"] is False and _decisions(ctl) == before

    one()
