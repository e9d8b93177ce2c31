"""What a source uses to reach the controller: short timeouts, never blocking a query for long.

Every call returns quickly. When the controller cannot be reached (not started, crashed, stopped) the client logs
one warning, answers "run unscheduled" (a grant), and tries to reconnect at most every ``retry`` seconds; once the
controller is back the client registers again, so a restarted controller (or a restarted query) picks up where
it left off. Progress and completion reports wait in a bounded buffer and travel with the next request.

Each connection starts with ``hello`` and the controller's secret (the ``controllerSecret`` option); a controller
that refuses it is treated as unreachable (one warning naming the reason). While a query runs its client sends at
least one request every ``HEARTBEAT`` seconds, so the controller can forget queries that stopped without a ``bye``;
a controller that forgot this one (``reregister`` in a reply) gets its registration again at once.
"""

from __future__ import annotations

import contextlib
import logging
import socket
import time
from collections import deque
from typing import Any

from adaptstream.control.ipc import LineSocket, parse_address

log = logging.getLogger("adaptstream.control")

HEARTBEAT = 10.0  # seconds between requests at least, while the query runs (the controller expires at 60 s)


class ControllerClient:
    def __init__(
        self,
        address: str,
        query: str,
        streams: dict[str, tuple[float, float]] | None = None,
        timeout: float = 2.0,
        retry: float = 2.0,
        log_path: str | None = None,
        secret: str | None = None,
    ) -> None:
        self.host, self.port = parse_address(address)
        self.secret = secret or ""
        self._last_call = time.monotonic()
        self.query = query
        self.streams = streams or {}
        self.timeout = timeout
        self.retry = retry
        self._conn: LineSocket | None = None
        self._registered = False
        self._down_since: float | None = None
        self._next_try = 0.0
        self._warned = False
        self.progress: deque[dict[str, Any]] = deque(maxlen=256)
        self.done: dict[str, Any] | None = None
        self.wanted = False
        self.unscheduled_polls = 0
        self._unreported = 0  # unscheduled grants the controller has not been told of yet
        self._quiet_until = 0.0
        self.log_path = log_path  # warnings also go here (the source's process logs where users rarely look)

    # -- connection --------------------------------------------------------------------------------------------
    def _connect(self) -> LineSocket | None:
        if self._conn is not None:
            return self._conn
        now = time.monotonic()
        if now < self._next_try:
            return None
        try:
            sock = socket.create_connection((self.host, self.port), timeout=self.timeout)
            sock.settimeout(self.timeout)
            self._conn = LineSocket(sock)
            self._registered = False
            hello = self._call_raw({"op": "hello", "secret": self.secret})
            if not (hello and hello.get("ok")):
                msg = f"it refused this source: {(hello or {}).get('error', 'no reply')}"
                raise ConnectionRefusedError(msg)
            self._register()
            if self._down_since is not None:
                self._warn(
                    f"adaptstream controller at {self.host}:{self.port} is back; query {self.query} is scheduled again"
                )
            self._down_since = None
            self._warned = False
            return self._conn
        except (OSError, ValueError) as e:
            self._fail(e)
            return None

    def _register(self) -> None:
        reply = self._call_raw(
            {"op": "register", "query": self.query, "streams": {k: list(v) for k, v in self.streams.items()}}
        )
        self._registered = bool(reply and reply.get("ok"))

    def _fail(self, e: BaseException) -> None:
        if self._conn is not None:
            self._conn.close()
        self._conn = None
        self._registered = False
        self._next_try = time.monotonic() + self.retry
        if self._down_since is None:
            self._down_since = time.monotonic()
        if not self._warned:
            self._warn(
                f"adaptstream controller at {self.host}:{self.port} unreachable ({e}): query {self.query} runs "
                "unscheduled until it is back"
            )
            self._warned = True

    def _warn(self, text: str) -> None:
        log.warning("%s", text)
        if self.log_path:
            with contextlib.suppress(OSError), open(self.log_path, "a") as f:
                f.write(f"{time.strftime('%Y-%m-%dT%H:%M:%S')} WARNING {text}\n")

    def _call_raw(self, msg: dict[str, Any]) -> dict[str, Any] | None:
        conn = self._conn
        if conn is None:
            return None
        conn.send(msg)
        reply = conn.recv()
        if reply is None:
            msg_ = "controller closed the connection"
            raise ConnectionError(msg_)
        return reply

    def _call(self, msg: dict[str, Any]) -> dict[str, Any] | None:
        fresh = self._conn is None
        if self._connect() is None:
            return None
        try:
            return self._call_raw(msg)
        except (OSError, ValueError) as e:
            if fresh:
                self._fail(e)
                return None
        # an established connection broke (the controller restarted?): one immediate fresh try
        if self._conn is not None:
            self._conn.close()
        self._conn = None
        if self._connect() is None:
            return None
        try:
            return self._call_raw(msg)
        except (OSError, ValueError) as e:
            self._fail(e)
            return None

    @property
    def connected(self) -> bool:
        return self._conn is not None

    # -- reports -----------------------------------------------------------------------------------------------
    def report_progress(
        self,
        stream: str,
        seq: int,
        arrival: float,
        event: float,
        origin: float,
        n: int = 1,
        total: float | None = None,
        squares: float | None = None,
    ) -> None:
        ev: dict[str, Any] = {
            "stream": stream,
            "seq": seq,
            "arrival": arrival,
            "event": event,
            "origin": origin,
            "n": n,
        }
        if total is not None and squares is not None:
            ev.update(sum=total, sumsq=squares)
        self.progress.append(ev)

    def report_done(self, end: int, rows: int, seconds: float) -> None:
        self.done = {"end": end, "rows": rows, "seconds": seconds}

    def poll(self, want: bool, rows: int = 0, oldest: float | None = None) -> bool:
        """May the query cut a micro-batch now? True when granted, or when the controller is unreachable."""
        idle = time.monotonic() - self._last_call < HEARTBEAT
        if idle and not want and not self.wanted and not self.progress and self.done is None:
            return False  # nothing new to say: no round trip while idle (but a heartbeat now and then)
        if want and self.done is None and time.monotonic() < self._quiet_until:
            return False  # refused less than a scheduling cycle ago
        msg: dict[str, Any] = {
            "op": "poll",
            "query": self.query,
            "want": want,
            "rows": rows,
            "oldest": oldest,
            "progress": list(self.progress),
            "done": self.done,
            "unscheduled": self._unreported,
        }
        self._last_call = time.monotonic()
        reply = self._call(msg)
        if reply is not None and reply.get("reregister"):
            with contextlib.suppress(OSError, ValueError):
                self._register()  # the controller forgot this query (it expired, or restarted): tell it again
        if reply is None or not reply.get("ok"):
            if reply is not None:
                log.warning("adaptstream controller refused a request: %s", reply.get("error"))
            self.unscheduled_polls += int(want)
            self._unreported += int(want)
            self.progress.clear()
            self.done = None
            self.wanted = False
            return want
        self.progress.clear()
        self.done = None
        self._unreported = 0
        self.wanted = want
        granted = bool(reply.get("grant", want))
        if want and not granted:
            self._quiet_until = time.monotonic() + float(reply.get("retry_in", 0.0))
        return granted

    def close(self) -> None:
        if self._conn is not None:
            with contextlib.suppress(OSError, ValueError):
                self._call_raw({"op": "bye", "query": self.query})
            self._conn.close()
            self._conn = None
