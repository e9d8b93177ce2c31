"""One controller per Spark application, on the driver: runs the scheduling policy for every query.

Started with the SparkSession (``Controller(policy).start()``); its address (``127.0.0.1:PORT``) goes to each
source in the ``controller`` option and its secret (random per controller) in ``controllerSecret``: every
connection must present the secret first (``hello``), so no other process on the machine can register queries or
steer decisions. Every request is checked against the schema of control/messages.py before the policy sees it;
a bad one gets a one-line error reply. Connections, live registrations and message size are bounded, and a query
that has sent nothing for ``expire`` seconds (its sources send a heartbeat while they run) is forgotten.

A server thread per connection answers requests under one lock, so the policy itself stays single-threaded pure
Python. A refused poll is answered at once only right after its query's batch completed (Spark may have a no-data
batch to run); otherwise it waits at the controller up to one scheduling cycle and is granted the moment a
completion frees a slot for it (``longpoll``: a waiting source learns of a free slot at once, not at its next poll
up to a cycle later). A sampler thread reports the driver JVM's heap use to the policy (Klink's memory mode) when a
Spark session is given. Stopping (or crashing) the controller never blocks a query: sources time out within their
short timeout and carry on unscheduled until it is back.
"""

from __future__ import annotations

import contextlib
import hmac
import logging
import secrets
import socket
import socketserver
import threading
import time
from collections.abc import Callable
from typing import Any

from adaptstream.control.ipc import LineSocket
from adaptstream.control.messages import check
from adaptstream.scheduling.base import SchedulerPolicy

log = logging.getLogger(__name__)

LONG_POLL_MAX = 0.25  # seconds a refused poll waits at the controller at most (sources time out after 0.5 s)


class _Handler(socketserver.BaseRequestHandler):
    server: _Server

    def handle(self) -> None:
        conn = LineSocket(self.request)
        ctl = self.server.controller
        if not ctl._admit(conn):
            return
        try:
            self.request.settimeout(AUTH_TIMEOUT)
            if not ctl._authenticate(conn):
                return
            self.request.settimeout(None)
            while not ctl.stopped:
                try:
                    msg = conn.recv()
                except (OSError, ValueError) as e:
                    with contextlib.suppress(OSError):
                        conn.send({"ok": False, "error": f"bad request: {e}"})
                    return
                if msg is None or ctl.stopped:
                    return
                try:
                    conn.send(ctl.handle(msg))
                except OSError:
                    return
        finally:
            ctl._conns.discard(conn)
            conn.close()


class _Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True
    controller: Controller


MAX_REMEMBERED = 1024  # queries whose registrations the controller remembers
MAX_CONNECTIONS = 256  # open connections at once (each source holds one)
MAX_LIVE = 512  # queries registered at once
AUTH_TIMEOUT = 5.0  # seconds a new connection has to present the secret
EXPIRE = 60.0  # seconds without a request after which a registered query is forgotten (heartbeat: 10 s)


class Controller:
    """Serves ``register``, ``poll`` (with piggy-backed progress and completion reports), ``output`` (rows a
    sink wrote), ``bye`` and ``stats``."""

    def __init__(
        self,
        policy: SchedulerPolicy,
        host: str = "127.0.0.1",
        port: int = 0,
        memory: Callable[[], float | None] | None = None,
        clock: Callable[[], float] = time.time,
        max_wait: float = LONG_POLL_MAX,
        secret: str | None = None,
        expire: float = EXPIRE,
    ) -> None:
        self.policy = policy
        #: what a source must present to be served; travels in the ``controllerSecret`` option (which Spark's
        #: default redaction pattern hides in its UI and logs). A restarted controller of the same application
        #: takes its predecessor's secret, so the running sources reconnect.
        self.secret = secret or secrets.token_hex(16)
        self.expire = expire
        self.last_seen: dict[str, float] = {}  # registered query -> clock of its last request
        self.rejected = 0  # connections or requests refused (no or a wrong secret, a bad message, a limit)
        self.max_wait = max_wait
        self.host, self.port = host, port
        self.memory = memory
        self.clock = clock
        self.lock = threading.Lock()
        self.changed = threading.Condition(self.lock)  # a completion, (re-)registration or stop: waiters re-poll
        self.stopped = False
        self.cpu_seconds = 0.0  # thread CPU spent inside the policy (scheduling overhead)
        self.requests = 0
        self.grants = 0
        self.refusals = 0
        self.waiting = 0  # polls waiting at the controller now
        self.woken_grants = 0  # grants made to a poll waiting at the controller, the moment a slot freed
        # register ops per query, kept after its ``bye``: shows that a restarted query (or a query after a
        # controller restart) came back, which the policy's live query set cannot once the query has ended
        self.registrations: dict[str, dict[str, Any]] = {}  # query -> {"count", "streams" of the latest}
        self.per_query: dict[str, dict[str, int]] = {}  # query -> {"grants", "holds"}: its own decisions
        self.on_register: Callable[[str, dict], None] | None = None  # told of every registration (the tuner)
        self._server: _Server | None = None
        self._threads: list[threading.Thread] = []
        self._conns: set[LineSocket] = set()

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    def start(self) -> Controller:
        self._server = _Server((self.host, self.port), _Handler, bind_and_activate=True)
        self._server.controller = self
        self.port = self._server.server_address[1]
        self.stopped = False
        t = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.1}, name="adaptstream-controller", daemon=True
        )
        t.start()
        self._threads = [t]
        if self.memory is not None:
            s = threading.Thread(target=self._sample, name="adaptstream-controller-memory", daemon=True)
            s.start()
            self._threads.append(s)
        return self

    def stop(self) -> None:
        """Stop serving and close the listening socket (connections in progress end at their next request)."""
        self.stopped = True
        with self.lock:
            self.changed.notify_all()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        for conn in list(self._conns):  # sources see the connection close and fall back at once
            conn.shutdown()

    def _sample(self) -> None:
        period = max(4 * self.policy.config.cycle, 0.25)
        while not self.stopped:
            try:
                used = self.memory() if self.memory else None
            except Exception as e:  # the JVM went away: the application is ending
                log.debug("memory sample failed: %s", e)
                return
            if used is not None:
                with self.lock:
                    self.policy.memory(self.clock(), used)
            time.sleep(period)

    # -- connections -------------------------------------------------------------------------------------------
    def _admit(self, conn: LineSocket) -> bool:
        with self.lock:
            if len(self._conns) >= MAX_CONNECTIONS:
                self.rejected += 1
                with contextlib.suppress(OSError):
                    conn.send({"ok": False, "error": f"too many connections (at most {MAX_CONNECTIONS})"})
                conn.close()
                return False
            self._conns.add(conn)
            return True

    def _authenticate(self, conn: LineSocket) -> bool:
        """The first request of a connection must be ``hello`` with this controller's secret."""
        try:
            msg = conn.recv()
        except (OSError, ValueError):
            msg = None
        ok = isinstance(msg, dict) and msg.get("op") == "hello" and isinstance(msg.get("secret"), str)
        if ok and hmac.compare_digest(str(msg["secret"]).encode(), self.secret.encode()):  # type: ignore[index]
            with contextlib.suppress(OSError):
                conn.send({"ok": True})
            return True
        with self.lock:
            self.rejected += 1
        with contextlib.suppress(OSError):
            conn.send({"ok": False, "error": "not authenticated: the first request must be hello with the secret"})
        return False

    # -- requests ------------------------------------------------------------------------------------------
    def handle(self, msg: Any) -> dict[str, Any]:
        """One request of an authenticated connection (or of the driver itself, which needs no secret)."""
        why = check(msg)
        if why is not None:
            with self.lock:
                self.rejected += 1
            return {"ok": False, "error": why}
        op = msg.get("op")
        with self.lock:
            t0 = time.thread_time()
            try:
                self._expire_idle()
                reply = self._dispatch(op, msg)
            except (KeyError, TypeError, ValueError) as e:
                reply = {"ok": False, "error": f"{type(e).__name__}: {e}"}
            self.cpu_seconds += time.thread_time() - t0
            self.requests += 1
            if reply.get("grant") is False and self._may_wait(msg):
                reply = {**self._wait_for_grant(msg), **({"reregister": True} if reply.get("reregister") else {})}
        return reply

    def _may_wait(self, msg: dict[str, Any]) -> bool:
        """Long-poll a refused request, except the first after a completed batch: Spark calls ``latestOffset``
        before it decides on a no-data batch (the one that emits a closed window), which must not wait."""
        return bool(self.policy.config.longpoll and msg.get("want") and not msg.get("done") and not self.stopped)

    def _wait_for_grant(self, msg: dict[str, Any]) -> dict[str, Any]:
        """Wait (the lock released) up to one cycle for a slot: re-poll the policy at every change and once at the
        end. Called with the lock held."""
        cycle = self.policy.config.cycle
        budget = min(cycle, self.max_wait)
        end = time.monotonic() + budget
        self.waiting += 1
        try:
            while not self.stopped:
                left = end - time.monotonic()
                woken = left > 0 and self.changed.wait(left)
                if self.stopped:
                    break
                if self._repoll(msg):
                    self.woken_grants += int(woken)
                    return {"ok": True, "grant": True, "retry_in": 0.0}
                if not woken:
                    break
        finally:
            self.waiting -= 1
        return {"ok": True, "grant": False, "retry_in": max(cycle - budget, 0.0)}

    def _repoll(self, msg: dict[str, Any]) -> bool:
        t0 = time.thread_time()
        grant = self.policy.poll(str(msg["query"]), self.clock(), True, int(msg.get("rows", 0)), msg.get("oldest"))
        self.cpu_seconds += time.thread_time() - t0
        if grant:  # the request was counted as refused
            self.grants += 1
            self.refusals -= 1
            counts = self._count(str(msg["query"]), True)
            counts["holds"] -= 1
        return grant

    def _counts(self, query: str) -> dict[str, int]:
        counts = self.per_query.setdefault(query, {"grants": 0, "holds": 0})
        while len(self.per_query) > MAX_REMEMBERED:  # bounded, as the registrations
            self.per_query.pop(next(iter(self.per_query)))
        return counts

    def _unscheduled(self, query: str, n: int) -> None:
        counts = self._counts(query)
        counts["unscheduled"] = counts.get("unscheduled", 0) + max(n, 0)

    def _count(self, query: str, grant: bool) -> dict[str, int]:
        counts = self._counts(query)
        counts["grants" if grant else "holds"] += 1
        return counts

    def report_output(self, query: str, rows: int) -> None:
        """The query's sink wrote ``rows`` result rows. Sinks run on the driver, beside the controller: a direct
        call, no IPC (``op: output`` serves sinks elsewhere)."""
        self.handle({"op": "output", "query": query, "rows": int(rows)})

    def _dispatch(self, op: Any, msg: dict[str, Any]) -> dict[str, Any]:
        now = self.clock()
        if op == "hello":
            return {"ok": True}
        if op == "register":
            return self._register(msg, now)
        if op == "poll":
            return self._poll(msg, now)
        if op == "output":
            self.policy.output(str(msg["query"]), now, int(msg["rows"]))
            return {"ok": True}
        if op == "bye":
            self.policy.unregister(str(msg["query"]))
            self.last_seen.pop(str(msg["query"]), None)
            self.changed.notify_all()
            return {"ok": True}
        if op == "stats":
            return {"ok": True, **self.stats()}
        return {"ok": False, "error": f"unknown op {op!r}"}

    def _register(self, msg: dict[str, Any], now: float) -> dict[str, Any]:
        q = str(msg["query"])
        if (full := self._full(q)) is not None:
            return full
        streams = {k: (float(v[0]), float(v[1])) for k, v in (msg.get("streams") or {}).items()}
        self.policy.register(q, streams, now)
        self.last_seen[q] = now
        self._note_registration(q, sorted(streams))
        self.changed.notify_all()  # a restarted query's slot is free
        if self.on_register is not None:
            self.on_register(q, streams)
        return {"ok": True, "policy": self.policy.name}

    def _poll(self, msg: dict[str, Any], now: float) -> dict[str, Any]:
        p, q = self.policy, str(msg["query"])
        new = q not in self.last_seen  # expired, or never registered here: its source registers again
        if (full := self._full(q)) is not None:
            return full
        self.last_seen[q] = now
        if msg.get("unscheduled"):  # batches it cut without an answer from here (a timeout, a restart)
            self._unscheduled(q, int(msg["unscheduled"]))
        for ev in msg.get("progress") or ():
            p.progress(q, str(ev["stream"]), int(ev["seq"]), float(ev["arrival"]), float(ev["event"]),
                       float(ev["origin"]), int(ev.get("n", 1)), ev.get("sum"), ev.get("sumsq"))  # fmt: skip
        done = msg.get("done")
        if done:
            p.complete(q, now, int(done["end"]), int(done["rows"]), float(done["seconds"]))
            self.changed.notify_all()  # a slot is free: waiting polls re-ask now
        again = {"reregister": True} if new else {}
        if "want" not in msg:
            return {"ok": True, **again}
        grant = p.poll(q, now, bool(msg["want"]), int(msg.get("rows", 0)), msg.get("oldest"))
        if msg["want"]:
            self.grants += int(grant)
            self.refusals += int(not grant)
            self._count(q, grant)
        # a refused source asks again after one scheduling cycle, not at every poll (Spark polls every 20 ms);
        # with ``longpoll`` the cycle is spent waiting here instead (handle), so it may ask again at once
        retry = 0.0 if grant or p.config.longpoll else p.config.cycle
        return {"ok": True, "grant": grant, "retry_in": retry, **again}

    def _full(self, query: str) -> dict[str, Any] | None:
        """The refusal for a query new to the controller when MAX_LIVE queries are registered, else None."""
        if query in self.last_seen or len(self.last_seen) < MAX_LIVE:
            return None
        return {"ok": False, "error": f"too many queries registered (at most {MAX_LIVE})"}

    def _expire_idle(self) -> None:
        """Forget queries that sent nothing for ``expire`` seconds: their sources stopped without a ``bye``."""
        cutoff = self.clock() - self.expire
        for q in [q for q, t in self.last_seen.items() if t < cutoff]:
            del self.last_seen[q]
            self.policy.unregister(q)
            self.changed.notify_all()

    def _note_registration(self, query: str, streams: list[str]) -> None:
        seen = self.registrations.pop(query, {"count": 0})
        self.registrations[query] = {"count": seen["count"] + 1, "streams": streams}
        while len(self.registrations) > MAX_REMEMBERED:  # bounded: forget the query registered longest ago
            self.registrations.pop(next(iter(self.registrations)))

    def stats(self) -> dict[str, Any]:
        """Counters for reports: requests, grants, policy decisions, CPU seconds, SWM estimate accuracy."""
        hits, checked = self.policy.swm_accuracy()
        return {
            "policy": self.policy.name,
            "requests": self.requests,
            "grants": self.grants,
            "refusals": self.refusals,
            "woken_grants": self.woken_grants,
            "decisions": self.policy.decisions,
            "holds": self.policy.holds,
            "memory_decisions": self.policy.memory_decisions,
            "bursts": self.policy.bursts,
            "cpu_seconds": self.cpu_seconds,
            "swm_hits": hits,
            "swm_checked": checked,
            "queries": sorted(self.policy.queries),
            "rejected": self.rejected,
            "registrations": {q: r["count"] for q, r in sorted(self.registrations.items())},
            "per_query": {q: dict(c) for q, c in sorted(self.per_query.items())},
            "selectivity": {
                k: q.selectivity for k, q in sorted(self.policy.queries.items()) if q.measured and q.in_decayed > 0
            },
        }


def jvm_heap_used(spark) -> Callable[[], float | None]:
    """A sampler of the driver JVM's heap that survived a young collection, as a share of the heap's maximum (local
    mode: the executors' too): every heap pool but the young generation's allocation space (G1's "Eden Space").

    Not ``total - free``: that counts garbage not yet collected, which on a busy driver reaches 85-92 % of the heap
    between collections without any pressure, and put Klink in memory mode (largest ``p_k`` first, nothing held)
    for about 40 % of its decisions in one 16-query run and 4 % in another (docs/klink.md)."""
    jvm = spark.sparkContext._jvm
    heap = jvm.java.lang.management.MemoryType.HEAP
    pools = [  # fixed for the JVM's life: resolved once, so a sample costs one call per pool
        p
        for p in jvm.java.lang.management.ManagementFactory.getMemoryPoolMXBeans()
        if p.getType() == heap and "eden" not in p.getName().lower()
    ]
    runtime = jvm.java.lang.Runtime.getRuntime()

    def sample() -> float | None:
        mx = runtime.maxMemory()
        return sum(p.getUsage().getUsed() for p in pools) / mx if mx > 0 else None

    return sample


def free_port(host: str = "127.0.0.1") -> int:
    """A port nobody listens on now (tests restart a controller on the same address)."""
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]
