"""The Redis Streams connector: datasets are runs of stream entries, discovered on the driver from metadata only and
read on the executors by exact entry-ID ranges.

* Address: ``redis[s]://[USER[:PASSWORD]@]HOST:PORT[/DB]/STREAM[,STREAM2...]`` (several streams per query;
  credentials also from the options redisUser / redisPassword or ADAPTSTREAM_REDIS_PASSWORD, never printed).
* A dataset is the entries of one arrival group: entry IDs are ``<ms>-<seq>`` and the ms part is the entry's
  arrival time on the server, so entries whose ms fall in the same ``datasetSeconds`` window (default 1 s) form one
  dataset, split into pieces of at most ``maxDatasetEntries`` so that no Spark task reads an unbounded range.
  A group is recorded once it is closed: a later entry exists, the server clock has passed its end (entries with
  automatic IDs can no longer land in it), or a drain / AvailableNow target covers it.
* Discovery runs as a Lua script on the server (``SCAN_SCRIPT``): it walks the new entries and returns per piece
  only the first and last ID, the entry count and the payload bytes, so no row travels to the driver.
* Offsets are manifest positions plus the last entry ID per stream; a micro-batch is an ID range per stream,
  replayed after a crash with ``XRANGE first last`` (IDs only grow, so the range can never gain entries). An
  executor that finds fewer entries than were recorded stops the query: data was lost upstream (trimmed or deleted).
* Entries: by default one field ``row`` holding one line in ``fileFormat`` (CSV in the workload's column order, or
  a JSON object); ``entryFormat=fields`` reads one field per column, by name (a missing field is null).
"""

from __future__ import annotations

import bisect
import json
import logging
import os
import re
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from dataclasses import field as dc_field
from typing import Any, TypeVar

import numpy as np
import pyarrow as pa

from adaptstream.config import option
from adaptstream.connectors.base import (
    Connector,
    ConnectorOptions,
    DatasetRef,
    Manifest,
    OnChanged,
    ReadTask,
    fingerprint,
    write_atomic,
)
from adaptstream.connectors.parsing import FileFormat, ParseResult, _convert, parse_bytes
from adaptstream.errors import ConfigError, ConnectorError

log = logging.getLogger(__name__)

ENTRY_FORMATS = ("row", "fields")
STARTING_POSITIONS = ("earliest", "latest")
XRANGE_CHUNK = 10_000  # entries per XRANGE round trip on the executors
SCAN_LIMIT = 20_000  # entries one discovery script call walks at most (the server is busy while it runs)
#: redis[s]://[USER[:PASSWORD]@]HOST:PORT[/DB]/STREAM[,STREAM2]: with two path segments the first is the database
_URL = re.compile(
    r"^(?P<scheme>rediss?)://(?:(?P<user>[^:@/]*)(?::(?P<password>[^@/]*))?@)?(?P<host>[^:/@]+):(?P<port>[0-9]{1,5})"
    r"(?:/(?P<db>[0-9]+))?/(?P<streams>[^/?#]+)$"
)
GRAMMAR = "redis[s]://[USER[:PASSWORD]@]HOST:PORT[/DB]/STREAM[,STREAM2]"
PASSWORD_ENV = "ADAPTSTREAM_REDIS_PASSWORD"
_USERINFO = re.compile(r"(rediss?://[^:@/]*):[^@/]*@")
T = TypeVar("T")


# -- addresses and IDs --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class RedisAddress:
    host: str
    port: int
    streams: tuple[str, ...]
    user: str | None = None
    password: str | None = dc_field(default=None, repr=False)  # never printed, logged or written
    db: int = 0
    tls: bool = False

    @property
    def where(self) -> str:
        """HOST:PORT[/DB]: what messages name (no credentials)."""
        return f"{self.host}:{self.port}" + (f"/{self.db}" if self.db else "")

    @property
    def url(self) -> str:
        """The address as a URL with the password masked."""
        who = f"{self.user or ''}{':***' if self.password else ''}@" if self.user or self.password else ""
        return f"{'rediss' if self.tls else 'redis'}://{who}{self.where}/{','.join(self.streams)}"


def redact(text: str) -> str:
    """``text`` with the password of any redis:// URL in it masked (for run.json, logs, messages)."""
    return _USERINFO.sub(r"\1:***@", str(text))


def parse_url(url: str, user: str | None = None, password: str | None = None) -> RedisAddress:
    """The address of :data:`GRAMMAR`. ``user`` / ``password`` (the options ``redisUser`` / ``redisPassword``) take
    precedence over the URL's; without either, the password comes from ``ADAPTSTREAM_REDIS_PASSWORD`` if set."""
    from urllib.parse import unquote

    m = _URL.match(str(url).strip())
    if not m or not 0 < int(m.group("port")) < 65536:
        msg = f"a Redis input must look like {GRAMMAR}, got {redact(url)!r}"
        raise ConfigError(msg)
    streams = tuple(s.strip() for s in m.group("streams").split(",") if s.strip())
    if not streams or len(set(streams)) != len(streams):
        msg = f"a Redis input names one or more distinct streams after the port, got {redact(url)!r}"
        raise ConfigError(msg)
    url_user = unquote(m.group("user")) if m.group("user") else None
    url_password = unquote(m.group("password")) if m.group("password") is not None else None
    secret = password or url_password or os.environ.get(PASSWORD_ENV) or None
    return RedisAddress(
        m.group("host"),
        int(m.group("port")),
        streams,
        user=user or url_user,
        password=secret,
        db=int(m.group("db") or 0),
        tls=m.group("scheme") == "rediss",
    )


def id_key(entry_id: str | bytes) -> tuple[int, int]:
    s = entry_id.decode() if isinstance(entry_id, bytes) else entry_id
    ms, _, seq = s.partition("-")
    return int(ms), int(seq or 0)


def next_id(entry_id: str) -> str:
    ms, seq = id_key(entry_id)
    return f"{ms}-{seq + 1}"


def prev_id(entry_id: str) -> str:
    ms, seq = id_key(entry_id)
    return f"{ms}-{seq - 1}" if seq > 0 else f"{ms - 1}-18446744073709551615"


# -- connections ---------------------------------------------------------------------------------------------
def client(addr: RedisAddress, timeout: float = 10.0):
    from redis.backoff import NoBackoff
    from redis.retry import Retry

    import redis

    # no client-side retries: ``retrying`` and the source's poll decide how long an absent server is waited for
    return redis.Redis(
        host=addr.host,
        port=addr.port,
        db=addr.db,
        username=addr.user,
        password=addr.password,
        ssl=addr.tls,
        socket_connect_timeout=2.0,
        socket_timeout=max(timeout, 5.0),
        retry=Retry(NoBackoff(), 0),
    )


def _transient() -> tuple[type[BaseException], ...]:
    import redis

    return (redis.ConnectionError, redis.TimeoutError, redis.BusyLoadingError, OSError)


def _refused() -> tuple[type[BaseException], ...]:
    """Errors no retry mends: wrong credentials (a ConnectionError subclass, so checked first), no permission."""
    import redis.exceptions as rx

    return (rx.AuthenticationError, rx.AuthenticationWrongNumberOfArgsError, rx.NoPermissionError)


def refused_error(addr: RedisAddress, e: BaseException) -> ConnectorError:
    who = f"user {addr.user!r}" if addr.user else "the default user"
    how = "with a password" if addr.password else "without a password"
    return ConnectorError(
        f"Redis at {addr.where} refused {who} {how}: {e} (credentials: {GRAMMAR}, options redisUser / "
        f"redisPassword, or {PASSWORD_ENV})"
    )


def check_reachable(addr: RedisAddress) -> None:
    """One quick attempt: an unreachable server at start is a clear error, not a hang."""
    try:
        client(addr).ping()
    except _refused() as e:
        raise refused_error(addr, e) from None
    except _transient() as e:
        msg = f"cannot reach Redis at {addr.where} (is redis-server running there?): {e}"
        raise ConnectorError(msg) from None


def retrying(addr: RedisAddress, timeout: float, what: str, fn: Callable[[], T]) -> T:
    """Run ``fn``, retrying while the server is unreachable or loading, for at most ``timeout`` seconds."""
    deadline = time.time() + timeout
    delay = 0.05
    while True:
        try:
            return fn()
        except _refused() as e:  # the server restarted with other credentials: waiting does not help
            raise refused_error(addr, e) from None
        except _transient() as e:
            if time.time() >= deadline:
                msg = f"Redis at {addr.where} unreachable for {timeout:g} s (option redisTimeout) while {what}: {e}"
                raise ConnectorError(msg) from None
            time.sleep(delay)
            delay = min(delay * 2, 1.0)


# -- discovery (driver) --------------------------------------------------------------------------------------
# KEYS[1] stream; ARGV: after (exclusive, '' = from the start), upto ('+' or an ID), group width ms, max entries
# per piece, entries to walk at most, close the last group ('1'/'0').
# Returns {now_ms, last-generated-id, entries-added, length, first entry ID, entries walked, more, first entry
# walked, piece...},
# piece = {group, first, last, n, bytes}; entries-added, length and first entry are read in the same atomic step.
SCAN_SCRIPT = """
local key, after, upto = KEYS[1], ARGV[1], ARGV[2]
local width, maxpiece, limit = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
local close_all = ARGV[6] == '1'
local t = redis.call('TIME')
local now_ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if redis.call('EXISTS', key) == 0 then return {now_ms, '0-0', 0, 0, '0-0', 0, 0, ''} end
local info = redis.call('XINFO', 'STREAM', key)
local last_gen, added, length, first = '0-0', 0, 0, '0-0'
for i = 1, #info, 2 do
  if info[i] == 'last-generated-id' then last_gen = info[i + 1] end
  if info[i] == 'entries-added' then added = info[i + 1] end
  if info[i] == 'length' then length = info[i + 1] end
  if info[i] == 'first-entry' and info[i + 1] then first = info[i + 1][1] end
end
local out = {now_ms, last_gen, added, length, first, 0, 0, ''}
local cur = nil
local scanned = 0
local start = '-'
if after ~= '' then start = '(' .. after end
local more = false
while scanned < limit do
  local n = math.min(1000, limit - scanned)
  local batch = redis.call('XRANGE', key, start, upto, 'COUNT', n)
  for _, e in ipairs(batch) do
    local id = e[1]
    local g = math.floor(tonumber(string.match(id, '^(%d+)')) / width)
    local nbytes, f = 0, e[2]
    for j = 2, #f, 2 do nbytes = nbytes + #f[j] end
    if cur ~= nil and (cur[1] ~= g or cur[4] >= maxpiece) then
      table.insert(out, cur)
      cur = nil
    end
    if out[8] == '' then out[8] = id end
    if cur == nil then cur = {g, id, id, 0, 0} end
    cur[3] = id
    cur[4] = cur[4] + 1
    cur[5] = cur[5] + nbytes
  end
  scanned = scanned + #batch
  if #batch < n then break end
  start = '(' .. batch[#batch][1]
  if scanned >= limit then more = true end
end
-- a prefix of a group can be cut anywhere (IDs only grow: a recorded range never gains entries)
if cur ~= nil and (close_all or more or cur[4] >= maxpiece or now_ms >= (cur[1] + 1) * width) then
  table.insert(out, cur)
end
out[6] = scanned
if more then out[7] = 1 end
return out
"""


@dataclass(frozen=True)
class RedisOptions(ConnectorOptions):
    """The Redis connector's options (``path`` is the redis:// URL)."""

    entry_format: str = option(
        "entryFormat",
        "row",
        "lower",
        choices=ENTRY_FORMATS,
        help="row: one field holding a line; fields: a field per column",
    )
    row_field: str = option("rowField", "row", help="the entry field holding the row (entryFormat=row)")
    dataset_seconds: float = option(
        "datasetSeconds",
        1.0,
        "float",
        low=0.001,
        help="entries whose ID milliseconds fall in one such window form a dataset",
    )
    max_dataset_entries: int = option(
        "maxDatasetEntries", 20_000, "int", low=1, help="a dataset piece holds at most this many entries"
    )
    starting_position: str = option(
        "startingPosition", "earliest", "lower", choices=STARTING_POSITIONS, help="fixed when the query first starts"
    )
    redis_timeout: float = option(
        "redisTimeout", 30.0, "duration", help="how long the query waits for an unreachable server before it fails"
    )
    redis_user: str | None = option("redisUser", None, help="ACL user (else the URL's, else the default user)")
    redis_password: str | None = option(
        "redisPassword", None, secret=True, help=f"else the URL's, else ${PASSWORD_ENV}; never logged"
    )
    trim: bool = option("trim", False, "bool", help="XTRIM MINID the entries Spark has committed")

    def address(self) -> RedisAddress:
        """The server and streams to read, with the credentials of the options, the URL or the environment."""
        return parse_url(str(self.path), self.redis_user, self.redis_password)

    def entries(self, file_format: FileFormat) -> EntryFormat:
        return EntryFormat(self.entry_format, self.row_field, file_format)


@dataclass(frozen=True)
class Piece:
    stream: str
    group: int
    first: str
    last: str
    entries: int
    bytes: int


def _s(v: Any) -> str:
    return v.decode() if isinstance(v, bytes) else str(v)


@dataclass(frozen=True)
class ScanReply:
    last_gen: str
    added: int  # entries ever added to the stream (XINFO entries-added)
    length: int
    first: str  # the first entry's ID ('0-0' when empty)
    walked: int  # entries after the cursor the script walked
    more: bool  # the walk stopped at its limit
    walked_from: str | None  # the first entry walked
    pieces: list[Piece]


class RedisConnector(Connector):
    """Discovers closed entry groups of each stream and records them as datasets (``DatasetRef`` with
    ``first_id``/``last_id``/``entries``); ``path`` is the stream's name."""

    name = "redis"
    options_class = RedisOptions
    start_on_initial_offset = True  # the start IDs (startingPosition) are fixed when the query first starts
    redaction_regex = r"(?i:rediss?://)[^@/\s]*@"  # the credentials of a redis:// URL in a path option

    @classmethod
    def claims(cls, path: str) -> bool:
        return path.startswith(("redis://", "rediss://"))

    @classmethod
    def check(cls, conn: ConnectorOptions, general: Any) -> None:
        assert isinstance(conn, RedisOptions)
        if not conn.path:
            msg = f"the redis connector needs .option('path', '{GRAMMAR}')"
            raise ConfigError(msg)
        conn.address()
        if not (general.state_path or general.metrics_path):
            msg = (
                "the redis connector needs a local directory for its manifest and offsets: set statePath "
                "(or metricsPath)"
            )
            raise ConfigError(msg)
        if conn.redis_timeout <= 0:
            msg = f"option redisTimeout must be > 0 seconds, got {conn.redis_timeout}"
            raise ConfigError(msg)

    @classmethod
    def from_options(cls, opts: Any, manifest: Manifest, state_dir: str, on_changed: OnChanged) -> RedisConnector:
        conn: RedisOptions = opts.conn
        c = cls(
            manifest,
            conn.address(),
            state_dir,
            group_seconds=conn.dataset_seconds,
            max_piece=conn.max_dataset_entries,
            starting=conn.starting_position,
            timeout=conn.redis_timeout,
            drain=opts.drain,
            sentinel_path=opts.sentinel_path,
        )
        c.entry_format = conn.entries(opts.file_format_spec())
        c.trim_committed = conn.trim
        return c

    def __init__(
        self,
        manifest: Manifest,
        addr: RedisAddress,
        state_dir: str,
        *,
        group_seconds: float = 1.0,
        max_piece: int = 20_000,
        starting: str = "earliest",
        timeout: float = 30.0,
        drain: bool = False,
        sentinel_path: str | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        super().__init__(manifest)
        self.addr = addr
        self.width_ms = max(1, round(group_seconds * 1000))
        self.max_piece = max_piece
        self.timeout = timeout
        self.drain = drain
        self.sentinel_path = sentinel_path
        self.clock = clock
        check_reachable(addr)
        self.r = client(addr, timeout)
        self._scan = self.r.register_script(SCAN_SCRIPT)
        self.entry_format = EntryFormat()  # how executors parse entries (from_options sets the query's)
        self.trim_committed = False  # XTRIM what Spark committed (option trim)
        self._started = clock()
        self._down_since: float | None = None
        self.start_ids, self.before = self._start(os.path.join(state_dir, "redis.json"), starting)
        self.cursor = {
            s: (self.manifest.last[s].last_id if s in self.manifest.last else self.start_ids[s]) for s in addr.streams
        }
        self.known = dict.fromkeys(addr.streams, 0)  # entries recorded in the manifest, per stream
        for ref in manifest.items:
            if ref.last_id:
                self.known[ref.path] += ref.entries
        self.first: dict[str, tuple[str, int]] = {}  # stream -> (first entry ID, length) at the last scan
        self.lost: dict[str, str] = {}  # stream -> why entries are known to be lost
        self.target: dict[str, str] | None = None
        if drain:
            self.freeze()

    def _start(self, path: str, starting: str) -> tuple[dict[str, str], dict[str, int]]:
        """Where each stream is read from and how many of its entries were added before that (not this query's),
        fixed when the query first starts (a restart reads them back)."""
        saved = read_start_file(path)
        missing = [s for s in self.addr.streams if s not in saved["start"]]
        if missing:
            for s in missing:  # earliest: every entry there now; latest: only entries added from now on
                info = self._info(s)
                saved["start"][s] = info.last_gen if starting == "latest" else "0-0"
                saved["before"][s] = info.added if starting == "latest" else info.added - info.length
            write_atomic(path, json.dumps(saved))
        return {s: saved["start"][s] for s in self.addr.streams}, {s: saved["before"][s] for s in self.addr.streams}

    def _call(self, stream: str, args: list, wait: bool) -> ScanReply:
        def call():
            return self._scan(keys=[stream], args=args)

        res = retrying(self.addr, self.timeout, f"reading stream {stream!r}", call) if wait else call()
        pieces = [Piece(stream, int(p[0]), _s(p[1]), _s(p[2]), int(p[3]), int(p[4])) for p in res[8:]]
        walked_from = _s(res[7]) or None
        return ScanReply(
            _s(res[1]), int(res[2]), int(res[3]), _s(res[4]), int(res[5]), bool(int(res[6])), walked_from, pieces
        )

    def _info(self, stream: str, wait: bool = True) -> ScanReply:
        return self._call(stream, ["", "+", self.width_ms, 1, 0, "0"], wait)

    # -- polling ------------------------------------------------------------------------------------------
    def freeze(self) -> None:
        """Deliver every entry present now and none added later (drain, Trigger.AvailableNow)."""
        self.target = {s: self._info(s).last_gen for s in self.addr.streams}

    def _scan_stream(self, stream: str) -> tuple[list[Piece], bool]:
        upto = self.target[stream] if self.target is not None else "+"
        if self.target is not None and id_key(self.cursor[stream]) >= id_key(upto):
            res = self._info(stream, wait=False)  # nothing left to discover; still watch for loss
        else:
            limit = max(SCAN_LIMIT, self.max_piece)
            args = [self.cursor[stream], upto, self.width_ms, self.max_piece, limit, "1" if self.target else "0"]
            res = self._call(stream, args, wait=False)
        self.first[stream] = (res.first, res.length)
        if self.target is None and not res.more:
            # Every entry after the cursor was walked: the entries added to the stream since the query started
            # are those recorded plus those walked, unless some were removed before the query saw them.
            missing = res.added - self.before[stream] - self.known[stream] - res.walked
            if missing > 0 and stream not in self.lost:
                after = self.cursor[stream]
                rng = f"({after}, {res.walked_from})" if res.walked_from else f"({after}, {res.last_gen}]"
                self.lost[stream] = (
                    f"{missing} entries in the ID range {rng} were trimmed or deleted before the query read them"
                )
        if res.pieces:
            self.cursor[stream] = res.pieces[-1].last
            self.known[stream] += sum(p.entries for p in res.pieces)
        return res.pieces, res.more

    def _discover(self) -> list[Piece]:
        found: list[Piece] = []
        for stream in self.addr.streams:
            for _ in range(8):  # a bounded amount of discovery per poll; a backlog is walked over several polls
                pieces, more = self._scan_stream(stream)
                found += pieces
                if not more:
                    break
        return found

    def poll(self) -> list[DatasetRef]:
        try:
            pieces = self._discover()
        except _refused() as e:
            raise refused_error(self.addr, e) from None
        except _transient() as e:
            now = self.clock()
            if self._down_since is None:
                self._down_since = now
                log.warning("Redis at %s unreachable, waiting up to %g s: %s", self.addr.where, self.timeout, e)
            if now - self._down_since > self.timeout:
                msg = f"Redis at {self.addr.where} unreachable for {self.timeout:g} s (option redisTimeout): {e}"
                raise ConnectorError(msg) from None
            return []
        self._down_since = None
        pieces.sort(key=lambda p: (id_key(p.last), p.stream))
        arrival = [max(id_key(p.last)[0] / 1000.0, self._started) for p in pieces]
        entries = [
            (p.stream, t, p.bytes, False, 0, "", p.first, p.last, p.entries)
            for p, t in zip(pieces, arrival, strict=True)
        ]
        refs = self.manifest.append(entries)
        if not refs and self._should_seal():
            path = str(self.sentinel_path)
            size = os.path.getsize(path)
            return self.manifest.append([(path, self.clock(), size, True, 0, fingerprint(path, 0, size))])
        return refs

    def caught_up(self) -> bool:
        """True once every entry up to the drain / AvailableNow target is in the manifest."""
        return self.target is not None and all(
            id_key(self.cursor[s]) >= id_key(self.target[s]) for s in self.addr.streams
        )

    def _should_seal(self) -> bool:
        return self.drain and self.sentinel_path is not None and not self.sealed() and self.caught_up()

    def sealed(self) -> bool:
        return any(r.sentinel for r in self.manifest.items[-1:])

    def exhausted(self) -> bool:
        return self.drain and (self.sealed() if self.sentinel_path else self.caught_up())

    # -- offsets, loss checks, trimming -------------------------------------------------------------------
    def ids_at(self, seq: int) -> dict[str, str]:
        """The last entry ID per stream covered by manifest positions [0, seq)."""
        ids: dict[str, str] = {}
        for ref in reversed(self.manifest.items[:seq]):
            if ref.last_id and ref.path not in ids:
                ids[ref.path] = ref.last_id
                if len(ids) == len(self.addr.streams):
                    break
        return {s: ids.get(s, self.start_ids[s]) for s in self.addr.streams}

    def check_not_lost(self, committed_seq: int) -> None:
        """Stop, naming the ID range, when entries above the committed offset were trimmed or deleted upstream:
        recorded ranges not yet committed must still start where they did, and nothing may vanish unseen."""
        pending: dict[str, DatasetRef] = {}
        for item in self.manifest.items[committed_seq:]:
            if item.last_id and item.path not in pending:
                pending[item.path] = item
        for s in self.addr.streams:
            why = self.lost.get(s)
            ref = pending.get(s)
            first, length = self.first.get(s, ("0-0", 1))
            if why is None and ref is not None and (length == 0 or id_key(first) > id_key(ref.first_id)):
                upto = f"{ref.last_id} (the stream is empty)" if length == 0 else f"{first} (excluded)"
                why = f"the entries with IDs from {ref.first_id} up to {upto} were trimmed or deleted"
            if why is not None:
                done = self.ids_at(committed_seq)[s]
                msg = (
                    f"stream {s!r} at {self.addr.where} lost entries above the committed offset {done}: {why} "
                    "(data lost upstream). Keep entries until the query has committed them (the source's trim "
                    "option does that), or start the query from a new checkpoint and state directory"
                )
                raise ConnectorError(msg)

    def offset_fields(self, seq: int) -> dict:
        return {"ids": self.ids_at(seq)}  # the last entry ID per stream, beside the manifest position

    def check_offset(self, offset: dict, state_dir: str) -> None:
        if "ids" not in offset:
            return
        ids = self.ids_at(int(offset["seq"]))
        if offset["ids"] != ids:
            msg = (
                f"offset {offset} does not match the source state in {state_dir} (its manifest gives "
                f"{ids} at that position); the checkpoint and statePath belong to different queries"
            )
            raise ConnectorError(msg)

    def committed(self, seq: int) -> None:
        if self.trim_committed:
            self.trim(self.ids_at(seq))  # only what Spark has committed

    # -- planning and reading ------------------------------------------------------------------------------
    def plan(self, refs: list[DatasetRef], num_blocks: int, max_task_bytes: int, parts_dir: str) -> list[ReadTask]:
        """Contiguous runs of entry ranges of about equal payload bytes per task; the file ranges among them (the
        end-of-input marker) planned as files."""
        from adaptstream.connectors.ranges import group_by_bytes, plan_slices, task_count

        ranges = [r for r in refs if r.last_id]
        files = [r for r in refs if not r.last_id]
        n = task_count(sum(r.bytes for r in ranges), num_blocks, max_task_bytes)
        tasks: list[ReadTask] = [
            RedisTask(self.addr, [EntryRange.of(r) for r in ranges[a:b]], parts_dir, self.entry_format, self.timeout)
            for a, b in group_by_bytes([r.bytes for r in ranges], n)
        ]
        return tasks + (plan_slices(files, 1, 0, parts_dir) if files else [])

    def load(self, ref: DatasetRef, schema: pa.Schema, fmt: FileFormat) -> ParseResult | None:
        """The driver path (readOn=driver, skew-aware partitioners) reads an entry range itself."""
        if not ref.last_id:
            return None
        return read_piece(
            self.r,
            self.addr,
            ref.seq,
            ref.path,
            ref.first_id,
            ref.last_id,
            ref.entries,
            schema,
            self.entry_format,
            self.timeout,
        )

    def exact_rows(self, ref: DatasetRef) -> int | None:
        return ref.entries if ref.entries >= 0 else None  # an entry range's count is known before it is read

    def trim(self, committed: dict[str, str]) -> None:
        """XTRIM MINID: drop the entries of each stream up to the committed offset (after Spark's commit)."""
        for s, done in committed.items():
            if id_key(done) > (0, 0):
                minid = next_id(done)

                def trim_one(s: str = s, minid: str = minid) -> object:
                    return self.r.xtrim(s, minid=minid, approximate=False)

                try:
                    retrying(self.addr, self.timeout, f"trimming {s!r}", trim_one)
                except ConnectorError as e:  # the next commit trims again (MINID only grows)
                    log.warning("%s", e)

    def stop(self) -> None:
        self.r.close()


def read_start_file(path: str) -> dict[str, dict]:
    """``redis.json``: where each stream is read from (fixed when the query first started). It decides which entries
    the query reads, so a damaged one stops the query with this message rather than being guessed again (a new
    guess under ``startingPosition=latest`` would skip or repeat entries)."""
    try:
        with open(path, encoding="utf-8") as f:
            saved = json.load(f)
        if not (isinstance(saved.get("start"), dict) and isinstance(saved.get("before"), dict)):
            raise ValueError("no start and before maps")
        return saved
    except FileNotFoundError:
        return {"start": {}, "before": {}}
    except (OSError, ValueError, AttributeError) as e:
        msg = (
            f"{path} (where each Redis stream is read from, fixed when the query first started) is damaged: {e}. "
            "Restore it from a backup, or start the query from a new checkpoint and statePath"
        )
        raise ConnectorError(msg) from None


# -- reading (executors) -------------------------------------------------------------------------------------
@dataclass(frozen=True)
class EntryFormat:
    kind: str = "row"  # row: one field holding a line in ``file`` format; fields: one field per column
    field: str = "row"
    file: FileFormat = dc_field(default_factory=FileFormat)


@dataclass(frozen=True)
class EntryRange:
    seq: int
    stream: str
    first: str
    last: str
    entries: int

    @classmethod
    def of(cls, ref: DatasetRef) -> EntryRange:
        return cls(ref.seq, ref.path, ref.first_id, ref.last_id, ref.entries)


class RedisTask(ReadTask):
    """Entry-ID ranges of Redis streams one Spark task reads with XRANGE; a range that lost entries is refused."""

    def __init__(self, addr: RedisAddress, ranges: list[EntryRange], parts_dir: str, fmt: EntryFormat, timeout: float):
        self.addr = addr
        self.ranges = ranges
        self.parts_dir = parts_dir
        self.fmt = fmt
        self.timeout = timeout

    def seqs(self) -> list[int]:
        return [r.seq for r in self.ranges]

    def read(self, schema: pa.Schema, fmt: FileFormat) -> Iterator[pa.RecordBatch]:
        from adaptstream.connectors.ranges import MAX_BATCH_ROWS, write_part_result

        r = client(self.addr, self.timeout)
        try:
            for rng in self.ranges:
                res = read_piece(
                    r, self.addr, rng.seq, rng.stream, rng.first, rng.last, rng.entries, schema, self.fmt, self.timeout
                )
                write_part_result(self.parts_dir, rng.seq, res)
                yield from res.table.to_batches(max_chunksize=MAX_BATCH_ROWS)
        finally:
            r.close()


def read_entries(r, addr: RedisAddress, stream: str, first: str, last: str, timeout: float) -> list:
    """Every entry with first <= ID <= last, in chunks, retrying while the server is away."""
    out: list = []
    lo = first
    while True:

        def one(lo: str = lo) -> list:
            return r.xrange(stream, min=lo, max=last, count=XRANGE_CHUNK)

        chunk = retrying(addr, timeout, f"reading {stream!r} {lo}..{last}", one)
        out += chunk
        if len(chunk) < XRANGE_CHUNK:
            return out
        lo = "(" + _s(chunk[-1][0])


def read_piece(
    r,
    addr: RedisAddress,
    ref_seq: int,
    stream: str,
    first: str,
    last: str,
    entries: int,
    schema: pa.Schema,
    fmt: EntryFormat,
    timeout: float,
) -> ParseResult:
    """Read exactly the recorded ID range and parse it; refuse it if entries are missing (lost upstream)."""
    got = read_entries(r, addr, stream, first, last, timeout)
    if len(got) != entries:
        seen = f"; the first entry still there is {_s(got[0][0])}" if got else ""
        msg = (
            f"dataset {ref_seq}: stream {stream!r} at {addr.where} holds {len(got)} of the {entries} entries in the "
            f"ID range {first}..{last} recorded when the batch was planned{seen}: entries were trimmed or deleted "
            "upstream before the query committed them (data lost upstream). Keep entries until the query has "
            "committed them, or start the query from a new checkpoint and state directory"
        )
        raise ConnectorError(msg)
    return parse_entries(got, schema, fmt)


def parse_entries(entries: list, schema: pa.Schema, fmt: EntryFormat) -> ParseResult:
    """Entries -> typed rows; a malformed entry is quarantined with its ID (``offset`` and ``id``)."""
    if fmt.kind == "fields":
        return _parse_fields(entries, schema, fmt)
    key = fmt.field.encode()
    bad: list[dict] = []
    values: list[bytes] = []
    ids: list[str] = []
    for eid, fields in entries:
        v = fields.get(key)
        if v is None:
            bad.append(_bad(eid, fields, f"no field {fmt.field!r}"))
            continue
        values.append(v)
        ids.append(_s(eid))
    if not values:
        return ParseResult(schema.empty_table(), bad)
    # One entry is one record. Entries with a line break (or blank) are parsed one by one; the others together,
    # unless an unclosed quote joined two of them (fewer records than entries), when they are parsed one by one.
    single = [i for i, v in enumerate(values) if b"\n" in v or b"\r" in v or not v.strip()]
    odd = set(single)
    rest = [i for i in range(len(values)) if i not in odd]
    tables: list[pa.Table] = []
    if rest:
        joined = _parse_joined([values[i] for i in rest], [ids[i] for i in rest], schema, fmt)
        if joined is None:
            single, rest = list(range(len(values))), []
        else:
            tables.append(joined.table)
            bad += joined.bad
    for i in sorted(single):
        one = parse_bytes(values[i] + b"\n", schema, fmt.file, header=False)
        if one.table.num_rows + len(one.bad) != 1:
            n = one.table.num_rows + len(one.bad)
            bad.append(_bad(ids[i], {key: values[i]}, f"the entry holds {n} records, not one"))
        elif one.bad:
            bad.append(
                {
                    "row": None,
                    "offset": ids[i],
                    "id": ids[i],
                    "raw": one.bad[0].get("raw"),
                    "reason": one.bad[0]["reason"],
                }
            )
        else:
            tables.append(one.table)
    return ParseResult(pa.concat_tables(tables) if tables else schema.empty_table(), bad)


def _parse_joined(values: list[bytes], ids: list[str], schema: pa.Schema, fmt: EntryFormat) -> ParseResult | None:
    """Entries without line breaks parsed as one text (the fast path); None when an unclosed quote joined some."""
    starts = np.concatenate([[0], np.cumsum([len(v) + 1 for v in values])[:-1]]).tolist()
    res = parse_bytes(b"\n".join(values) + b"\n", schema, fmt.file, header=False)
    if res.table.num_rows + len(res.bad) != len(values):
        return None
    bad = []
    for b in res.bad:
        k = bisect.bisect_right(starts, b["offset"]) - 1 if b.get("offset") is not None else (b.get("row") or 0) - 1
        eid = ids[k] if 0 <= k < len(ids) else None
        bad.append({"row": None, "offset": eid, "id": eid, "raw": b.get("raw"), "reason": b["reason"]})
    return ParseResult(res.table, bad)


def _parse_fields(entries: list, schema: pa.Schema, fmt: EntryFormat) -> ParseResult:
    null = fmt.file.null_value.encode()
    cols = {}
    for f in schema:
        key = f.name.encode()
        vals = [fields.get(key) for _, fields in entries]
        cols[f.name] = pa.array([None if v == null else v for v in vals], pa.binary())
    table, cast_bad = _convert(pa.table(cols), schema)
    bad = [_bad(entries[i][0], entries[i][1], reason) for i, reason in cast_bad]
    return ParseResult(table, bad)


def _bad(eid, fields: dict, reason: str) -> dict:
    raw = json.dumps({_s(k): v.decode("utf-8", errors="backslashreplace") for k, v in fields.items()})
    return {"row": None, "offset": _s(eid), "id": _s(eid), "raw": raw, "reason": reason}


def iter_batches(table: pa.Table, max_rows: int) -> Iterator[pa.RecordBatch]:
    yield from table.to_batches(max_chunksize=max_rows)
