"""Connectors: where datasets come from. Every connector delivers datasets into one durable, ordered manifest,
so a query restarted from its checkpoint re-reads exactly the same bytes (offsets are manifest positions).

A dataset is a byte range of a file, recorded with the file's size and a content fingerprint when it was admitted:
executors read exactly that range and refuse it if the bytes changed, so a replay can never see different data.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import logging
import os
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import pyarrow as pa

from adaptstream.errors import ConnectorError

if TYPE_CHECKING:
    from adaptstream.connectors.parsing import FileFormat, ParseResult

OnChanged = Callable[[str, str], None] | None

log = logging.getLogger(__name__)

FINGERPRINT_BYTES = 16 * 1024  # bytes hashed at each end of a range


@dataclass(frozen=True)
class DatasetRef:
    """One dataset: bytes [start, start + bytes) of ``path``, which entered the system at ``arrival``."""

    seq: int
    path: str
    arrival: float
    bytes: int
    sentinel: bool = False  # the end-of-input marker rows (advance the watermark; queries drop them)
    start: int = 0  # byte offset in the file (> 0 for rows appended after an earlier admission)
    fingerprint: str = ""  # see fingerprint(); empty for entries written before fingerprints existed
    first_id: str = ""  # Redis Streams: the entry-ID range [first_id, last_id] of stream ``path`` ...
    last_id: str = ""
    entries: int = -1  # ... holding this many entries (-1: a file range)

    @property
    def end(self) -> int:
        return self.start + self.bytes


def fingerprint_bytes(head: bytes, tail: bytes, length: int) -> str:
    """Hash of a range's first and last FINGERPRINT_BYTES and its length: cheap on the driver (no full read),
    and it catches rewrites, truncation and most in-place edits. A change confined to the middle of a range
    larger than 32 KiB that keeps its length is not detected (documented in docs/source.md)."""
    h = hashlib.blake2b(digest_size=12)
    h.update(str(length).encode())
    h.update(head)
    h.update(tail)
    return h.hexdigest()


def _ends(f, start: int, length: int) -> tuple[bytes, bytes]:
    n = min(length, FINGERPRINT_BYTES)
    f.seek(start)
    head = f.read(n)
    f.seek(start + length - n)
    return head, f.read(n)


def fingerprint(path: str, start: int, length: int) -> str:
    """Fingerprint of bytes [start, start + length) of a file (reads at most 32 KiB)."""
    with open(path, "rb") as f:
        head, tail = _ends(f, start, length)
    if len(head) < min(length, FINGERPRINT_BYTES) or len(tail) < min(length, FINGERPRINT_BYTES):
        msg = f"{path} is shorter than {start + length} bytes"
        raise ConnectorError(msg)
    return fingerprint_bytes(head, tail, length)


def fingerprint_of(data: bytes) -> str:
    """The same fingerprint, computed from bytes already read (executors verify what they parse)."""
    n = min(len(data), FINGERPRINT_BYTES)
    return fingerprint_bytes(data[:n], data[len(data) - n :], len(data))


def read_jsonl(path: str) -> Iterator[dict]:
    """Records of a JSON-lines file written by append_jsonl. A torn last record (a crash mid-write) is cut off
    the file and skipped; a bad record anywhere else is corruption and raises."""
    if not os.path.exists(path):
        return
    with open(path, "rb") as f:
        data = f.read()
    good_end = 0
    lines = data.split(b"\n")
    for k, line in enumerate(lines):
        last = k == len(lines) - 1
        if not line.strip():
            good_end += len(line) + (0 if last else 1)
            continue
        try:
            if last:  # no newline after it: the write was cut
                raise ValueError("no newline")
            rec = json.loads(line)
        except ValueError:
            if k >= len(lines) - 2 and (last or not any(x.strip() for x in lines[k + 1 :])):
                log.warning("%s: dropping a torn last record (%d bytes) left by a crash", path, len(line))
                with open(path, "r+b") as f:
                    f.truncate(good_end)
                return
            msg = f"{path} is corrupt at record {k + 1}: {line[:80]!r}"
            raise ConnectorError(msg) from None
        good_end += len(line) + 1
        yield rec


def append_jsonl(path: str, records: list[dict], sync: bool = True) -> None:
    """Append records in one write (then fsync), so a crash leaves at most one torn record at the end."""
    if not records:
        return
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    payload = "".join(json.dumps(r, default=float) + "\n" for r in records).encode()
    with open(path, "ab") as f:
        f.write(payload)
        f.flush()
        if sync:
            os.fsync(f.fileno())


def write_atomic(path: str, text: str) -> None:
    """Write a whole file under a temporary name and rename it into place (idempotent for retried tasks)."""
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, path)


class StateLock:
    """An exclusive lock on a query's state directory, held by the source process while the query runs.

    Two live queries sharing one manifest would corrupt each other's offsets; the OS releases the lock when the
    process dies (kill -9 included), so a restarted query never finds a stale lock."""

    def __init__(self, state_dir: str) -> None:
        self.path = os.path.join(state_dir, "lock")
        try:
            os.makedirs(state_dir, exist_ok=True)
            self._f = open(self.path, "a+")  # noqa: SIM115 - held open for the query's lifetime
        except OSError as e:
            msg = (
                f"cannot use the source state directory {state_dir}: {e.strerror or e}; set statePath to a writable one"
            )
            raise ConnectorError(msg) from None
        try:
            fcntl.flock(self._f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            self._f.seek(0)
            holder = self._f.read().strip() or "another process"
            self._f.close()
            msg = (
                f"the source state directory {state_dir} is in use by another running query ({holder}); "
                "give each query its own .option('statePath', DIR), or stop the other query"
            )
            raise ConnectorError(msg) from None
        self._f.seek(0)
        self._f.truncate()
        self._f.write(f"pid {os.getpid()}\n")
        self._f.flush()

    def release(self) -> None:
        if not self._f.closed:
            fcntl.flock(self._f.fileno(), fcntl.LOCK_UN)
            self._f.close()


class Manifest:
    """Append-only list of datasets in arrival order, persisted as JSON lines (fsynced before it is used)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.items: list[DatasetRef] = []
        self.last: dict[str, DatasetRef] = {}  # path -> its latest range
        for rec in read_jsonl(path):
            self._add(DatasetRef(**rec))

    def admitted(self, path: str) -> int:
        """Bytes of ``path`` admitted so far (the end of its latest range)."""
        ref = self.last.get(path)
        return ref.end if ref is not None else 0

    def _add(self, ref: DatasetRef) -> None:
        if ref.seq != len(self.items):
            msg = f"manifest {self.path} is corrupt: entry {ref.seq} found at position {len(self.items)}"
            raise ConnectorError(msg)
        self.items.append(ref)
        self.last[ref.path] = ref

    def append(self, entries: list[tuple]) -> list[DatasetRef]:
        """Entries are (path, arrival, bytes, sentinel[, start, fingerprint[, first_id, last_id, entries]])."""
        refs = []
        for entry in entries:
            ref = DatasetRef(len(self.items), *entry[:4], *entry[4:])
            self._add(ref)
            refs.append(ref)
        append_jsonl(self.path, [dict(vars(r)) for r in refs])
        return refs

    def __len__(self) -> int:
        return len(self.items)

    def slice(self, start: int, end: int) -> list[DatasetRef]:
        if end > len(self.items):
            msg = f"offset {end} is beyond the manifest ({len(self.items)} datasets) at {self.path}"
            raise ConnectorError(msg)
        return self.items[start:end]


@dataclass(frozen=True)
class ConnectorOptions:
    """A connector's own options (fields made with :func:`adaptstream.config.option`); ``path`` is the source's."""

    path: str | None = None


class ReadTask(ABC):
    """What one Spark task reads, as a connector planned it: picklable, shipped to an executor inside an input
    partition, read there without the driver."""

    @abstractmethod
    def seqs(self) -> list[int]:
        """The manifest positions of the datasets this task reads (for the batch's accounting)."""

    @abstractmethod
    def read(self, schema: pa.Schema, fmt: FileFormat) -> Iterator[pa.RecordBatch]:
        """The rows, read and parsed on the executor (each dataset's row count and bad rows go to its part file)."""


class Connector(ABC):
    """Discovers new datasets; the source turns them into micro-batches.

    A connector is registered in ``adaptstream.connectors.CONNECTORS`` under ``name`` and owns everything that is
    particular to where its data comes from: its options (``options_class``), how it is built from them, the extra
    fields of its offsets and their check, the planning of a micro-batch into read tasks and their executor-side
    read, and the optional hooks below. The Spark source (spark/datasource.py) calls only this interface."""

    name: ClassVar[str] = ""
    options_class: ClassVar[type[ConnectorOptions]] = ConnectorOptions
    #: True when the connector must start at the query's first offset (it fixes where reading begins then)
    start_on_initial_offset: ClassVar[bool] = False
    #: a regular expression of secrets in option values that Spark must redact from plans and logs
    redaction_regex: ClassVar[str] = ""

    def __init__(self, manifest: Manifest) -> None:
        self.manifest = manifest

    # -- construction ---------------------------------------------------------------------------------------
    @classmethod
    def claims(cls, path: str) -> bool:
        """True when ``path`` names this connector's kind of input (chosen when no connector option is given)."""
        return False

    @classmethod  # noqa: B027 - optional hook
    def check(cls, conn: ConnectorOptions, general: Any) -> None:
        """Refuse options that cannot work together (``general``: the source's SourceOptions); ConfigError."""

    @classmethod
    @abstractmethod
    def from_options(cls, opts: Any, manifest: Manifest, state_dir: str, on_changed: OnChanged) -> Connector:
        """Build the connector from the source's SourceOptions (``opts.conn`` holds this connector's own)."""

    @classmethod
    def schema(cls, opts: Any) -> Any:
        """The schema when the user gives none (a DDL string or a StructType), or None: the user must give one."""
        return None

    # -- discovery ------------------------------------------------------------------------------------------
    @abstractmethod
    def poll(self) -> list[DatasetRef]:
        """Register newly arrived datasets in the manifest and return them."""

    def start(self) -> None:  # noqa: B027 - optional hook
        """The engine is ready for data (after Spark's start-up batch); generated traffic may begin."""

    def exhausted(self) -> bool:
        """True when no dataset will ever arrive again (finite inputs only)."""
        return False

    def freeze(self) -> None:  # noqa: B027 - optional hook
        """Trigger.AvailableNow: fix what is present now; ``caught_up`` turns true once all of it is recorded."""

    def caught_up(self) -> bool:
        return True

    def stop(self) -> None:  # noqa: B027 - optional hook
        """Release threads or handles."""

    # -- offsets --------------------------------------------------------------------------------------------
    def offset_fields(self, seq: int) -> dict:
        """Fields beside the manifest position in the offset Spark checkpoints for position ``seq``."""
        return {}

    def check_offset(self, offset: dict, state_dir: str) -> None:  # noqa: B027 - optional hook
        """Refuse an offset whose extra fields do not match this connector's state (another query's checkpoint)."""

    def check_not_lost(self, committed_seq: int) -> None:  # noqa: B027 - optional hook
        """Stop the query when datasets recorded before were lost upstream."""

    def committed(self, seq: int) -> None:  # noqa: B027 - optional hook
        """Spark committed every dataset before position ``seq`` (a connector may release them upstream)."""

    # -- planning -------------------------------------------------------------------------------------------
    def plan(self, refs: list[DatasetRef], num_blocks: int, max_task_bytes: int, parts_dir: str) -> list[ReadTask]:
        """Read tasks for one micro-batch: by default contiguous runs of file ranges of about equal bytes."""
        from adaptstream.connectors.ranges import plan_slices

        return plan_slices(refs, num_blocks, max_task_bytes, parts_dir)

    def load(self, ref: DatasetRef, schema: pa.Schema, fmt: FileFormat) -> ParseResult | None:
        """Read a dataset on the driver (skew-aware partitioners), or None: it is a file range the driver reads."""
        return None

    def exact_rows(self, ref: DatasetRef) -> int | None:
        """A dataset's row count when it is known before anything is read (else it is estimated from bytes)."""
        return None

    def event_progress(self, ref: DatasetRef) -> tuple | None:
        """(newest event time, event-time origin[, events, delay sum, delay sum of squares]) of a new dataset when
        the connector knows it (generated input), for the scheduling controller; None when unknown."""
        return None
