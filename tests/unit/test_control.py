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


@pytest.fixture
def controller():
    ctl = Controller(build_scheduler("fcfs", slots=1, cycle=1e-6)).start()
    try:
        yield ctl
    finally:
        ctl.stop()


def test_two_sources_share_one_slot(controller):
    a = ControllerClient(controller.address, "a", {"main": (2.0, 0.5)}, retry=0.0)
    b = ControllerClient(controller.address, "b", retry=0.0)
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
    c = ControllerClient(controller.address, "idle", retry=0.0)
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
    c = ControllerClient(ctl.address, "q", {"main": (1.0, 0.0)}, retry=0.0)
    assert c.poll(True, 5) is True
    ctl.stop()
    with caplog.at_level(logging.WARNING, logger="adaptstream.control"):
        assert c.poll(True, 5) is True  # the connection broke: unscheduled, not stuck
    ctl2 = Controller(build_scheduler("rr"), port=port).start()
    try:
        assert c.poll(True, 5) is True
        assert "q" in ctl2.policy.queries and "main" in ctl2.policy.queries["q"].streams
        assert any("is back" in r.getMessage() for r in caplog.records)
    finally:
        c.close()
        ctl2.stop()


def test_registrations_are_remembered_after_bye_and_bounded(controller, monkeypatch):
    c = ControllerClient(controller.address, "q", {"main": (1.0, 0.0)}, retry=0.0)
    assert c.poll(True, 1) is True
    c.close()  # sends bye: the policy forgets the query, the controller's record keeps it
    assert "q" not in controller.policy.queries
    assert controller.registrations["q"] == {"count": 1, "streams": ["main"]}
    c2 = ControllerClient(controller.address, "q", retry=0.0)
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
    c = ControllerClient(controller.address, "q", retry=0.0)
    assert c.poll(True, 1) is True


def test_bad_address_is_a_config_error():
    with pytest.raises(ConfigError, match=r"127\.0\.0\.1:PORT"):
        ControllerClient("localhost", "q")


def test_a_refused_source_waits_one_cycle_before_asking_again():
    ctl = Controller(build_scheduler("fcfs", slots=1, cycle=60.0)).start()
    try:
        a = ControllerClient(ctl.address, "a", retry=0.0)
        b = ControllerClient(ctl.address, "b", retry=0.0)
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
        a = ControllerClient(ctl.address, "a", retry=0.0, timeout=30.0)
        b = ControllerClient(ctl.address, "b", retry=0.0, timeout=30.0)
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
        a = ControllerClient(ctl.address, "a", retry=0.0, timeout=30.0)
        b = ControllerClient(ctl.address, "b", retry=0.0, timeout=30.0)
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
    a = ControllerClient(ctl.address, "a", retry=60.0, timeout=30.0)
    b = ControllerClient(ctl.address, "b", retry=60.0, timeout=30.0)
    assert a.poll(True, 1) is True
    t, out = _poll_in_thread(b, True, 1)
    _until(lambda: ctl.waiting == 1)
    ctl.stop()
    t.join(15.0)
    assert not t.is_alive() and len(out) == 1  # answered (refused, or unscheduled once the connection closed)
