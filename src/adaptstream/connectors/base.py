"""Connectors: where datasets come from. Every connector delivers datasets into one durable, ordered manifest,
so a query restarted from its checkpoint re-reads exactly the same rows (offsets are manifest positions)."""

from __future__ import annotations

import json
import os
from abc import ABC, abstractmethod
from dataclasses import asdict, dataclass

from adaptstream.errors import ConnectorError


@dataclass(frozen=True)
class DatasetRef:
    """One dataset: a file that entered the system at ``arrival`` (epoch seconds)."""

    seq: int
    path: str
    arrival: float
    bytes: int
    sentinel: bool = False  # the end-of-input marker rows (advance the watermark; queries drop them)


class Manifest:
    """Append-only list of datasets in arrival order, persisted as JSON lines (fsynced before it is used)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.items: list[DatasetRef] = []
        self.known: set[str] = set()
        if os.path.exists(path):
            with open(path, encoding="utf-8") as f:
                for line in f:
                    if line.strip():
                        self._add(DatasetRef(**json.loads(line)))

    def _add(self, ref: DatasetRef) -> None:
        if ref.seq != len(self.items):
            msg = f"manifest {self.path} is corrupt: entry {ref.seq} found at position {len(self.items)}"
            raise ConnectorError(msg)
        self.items.append(ref)
        self.known.add(ref.path)

    def append(self, entries: list[tuple[str, float, int, bool]]) -> list[DatasetRef]:
        refs = []
        for path, arrival, size, sentinel in entries:
            ref = DatasetRef(len(self.items), path, arrival, size, sentinel)
            self._add(ref)
            refs.append(ref)
        if refs:
            os.makedirs(os.path.dirname(self.path) or ".", exist_ok=True)
            with open(self.path, "a", encoding="utf-8") as f:
                for ref in refs:
                    f.write(json.dumps(asdict(ref)) + "\n")
                f.flush()
                os.fsync(f.fileno())
        return refs

    def __len__(self) -> int:
        return len(self.items)

    def slice(self, start: int, end: int) -> list[DatasetRef]:
        if end > len(self.items):
            msg = f"offset {end} is beyond the manifest ({len(self.items)} datasets) at {self.path}"
            raise ConnectorError(msg)
        return self.items[start:end]


class Connector(ABC):
    """Discovers new datasets; the source turns them into micro-batches."""

    def __init__(self, manifest: Manifest) -> None:
        self.manifest = manifest

    @abstractmethod
    def poll(self) -> list[DatasetRef]:
        """Register newly arrived datasets in the manifest and return them."""

    def start(self) -> None:  # noqa: B027 - optional hook
        """The engine is ready for data (after Spark's start-up batch); generated traffic may begin."""

    def exhausted(self) -> bool:
        """True when no dataset will ever arrive again (finite inputs only)."""
        return False

    def stop(self) -> None:  # noqa: B027 - optional hook
        """Release threads or handles."""
