"""The contract every policy family shares (admission, partitioning, and later scheduling, elasticity, devices).

Life cycle: a frozen config dataclass (validated, built by name from a :class:`~adaptstream.registry.Registry`)
-> ``config.build()`` -> a running policy that
* keeps its learned state in bounded structures (ring buffers, running sums, windows), so memory does not grow
  with the number of batches;
* reads time only through an injected clock (``set_clock``) or from the ``now`` arguments the engine passes;
* snapshots that state with ``state_dict()`` (a JSON-serialisable dict) and takes it back with
  ``load_state_dict()``, so a restarted query resumes the decisions of the uninterrupted one.

What a snapshot covers: everything learned *across* batches. Statistics of a batch that is still buffering are
not in it: after a restart Spark replays that batch and the source observes its rows again.
:class:`PolicyStateFile` is the persistence the streaming source uses at every commit.
"""

from __future__ import annotations

import base64
import json
import math
import os
import tempfile
import time
import warnings
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from adaptstream.errors import ConfigError

#: a source of seconds; policies compare clock readings only with readings of the same clock
Clock = Callable[[], float]

STATE_VERSION = 1


class PolicyStateError(ConfigError):
    """A snapshot does not fit the policy it is loaded into (another policy, another version, a bad value)."""


class ManualClock:
    """A clock that moves only when told to: deterministic tests and simulations (``clock.advance(0.5)``)."""

    def __init__(self, start: float = 0.0) -> None:
        self.now = float(start)

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> float:
        self.now += float(seconds)
        return self.now


class Policy:
    """Base of every family's policy base: snapshot/restore envelope and the injected clock.

    Subclasses keep their learned state in bounded structures and override ``_state`` / ``_load_state``;
    the envelope records the policy name and a version so a snapshot cannot be loaded into the wrong policy.
    """

    name: str = "base"
    clock: Clock = time.perf_counter

    def set_clock(self, clock: Clock) -> Policy:
        """Inject the clock the policy reads when the engine passes no time (returns self, for chaining)."""
        self.clock = clock
        return self

    def state_dict(self) -> dict[str, Any]:
        """JSON-serialisable snapshot of what the policy learned across batches."""
        return {"policy": self.name, "version": STATE_VERSION, "state": self._state()}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Resume from a ``state_dict()`` of a policy built from the same config."""
        if not isinstance(state, Mapping) or "state" not in state:
            msg = f"{self.name}: not a policy snapshot (expected keys policy, version, state): {state!r:.200}"
            raise PolicyStateError(msg)
        if state.get("policy") != self.name:
            msg = f"snapshot of policy {state.get('policy')!r} cannot be loaded into {self.name!r}"
            raise PolicyStateError(msg)
        if state.get("version") != STATE_VERSION:
            msg = f"{self.name}: snapshot version {state.get('version')!r}, this build reads {STATE_VERSION}"
            raise PolicyStateError(msg)
        try:
            self._load_state(state["state"])
        except (KeyError, TypeError, ValueError) as e:
            msg = f"{self.name}: snapshot does not fit this policy ({type(e).__name__}: {e})"
            raise PolicyStateError(msg) from e

    def _state(self) -> dict[str, Any]:
        return {}

    def _load_state(self, state: Mapping[str, Any]) -> None:
        """Restore from ``_state()``'s dict (default: nothing to restore)."""


def parse_params(text: str, option: str) -> tuple[tuple[str, str], ...]:
    """An option's ``'name=value;name=value'`` (``--scheduler-params``, ``--elastic-params``) as a hashable tuple
    of strings; :meth:`Registry.build` checks the names and coerces each value to its field's type (one coercion
    for every family)."""
    from adaptstream.config import parse_kv

    return tuple(parse_kv(text, option).items())


# -- JSON helpers for snapshots -------------------------------------------------------------------------------
def finite_or_none(x: float | None) -> float | None:
    """JSON has no inf/nan: store them as None."""
    return None if x is None or not math.isfinite(x) else float(x)


def encode_array(a: np.ndarray) -> dict[str, Any]:
    """A numpy array as a JSON-safe dict (base64 of its bytes: compact for sketches and tables)."""
    arr = np.ascontiguousarray(a)
    return {"dtype": arr.dtype.str, "shape": list(arr.shape), "b64": base64.b64encode(arr.tobytes()).decode("ascii")}


def decode_array(d: Mapping[str, Any]) -> np.ndarray:
    """Inverse of :func:`encode_array` (a writable copy)."""
    raw = base64.b64decode(d["b64"])
    return np.frombuffer(raw, dtype=np.dtype(d["dtype"])).reshape(d["shape"]).copy()


# -- persistence ----------------------------------------------------------------------------------------------
class PolicyStateFile:
    """The policies' snapshots of one query, kept as one JSON file beside the source's other state.

    ``save`` replaces the file atomically (write to a temporary file, fsync, rename), so a kill leaves either the
    previous snapshot or the new one. Policies that are None are skipped (e.g. the "time" partitioner the source
    does not build).
    """

    def __init__(self, path: str) -> None:
        self.path = path

    def save(self, offset: int, **policies: Policy | None) -> None:
        doc = {
            "offset": int(offset),
            "policies": {k: p.state_dict() for k, p in policies.items() if p is not None},
        }
        text = json.dumps(doc, allow_nan=False, separators=(",", ":"))
        folder = os.path.dirname(os.path.abspath(self.path))
        os.makedirs(folder, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".policies-", dir=folder)
        try:
            with os.fdopen(fd, "w") as f:
                f.write(text)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, self.path)
        except BaseException:
            if os.path.exists(tmp):
                os.unlink(tmp)
            raise

    def load(self) -> dict[str, Any] | None:
        """The saved document, or None when nothing was saved yet or the file is unreadable.

        The file holds learned state only (no data offsets the query depends on), so a damaged file (a torn or
        truncated write, garbage, a bad copy) must not stop the query: it is moved aside to ``<file>.bad``, one
        warning names both files, and every policy starts fresh."""
        if not os.path.exists(self.path):
            return None
        try:
            with open(self.path, "rb") as f:
                doc = json.loads(f.read().decode("utf-8"))
            if not isinstance(doc, dict) or not isinstance(doc.get("policies", {}), dict):
                raise ValueError("not a policy-state document")
            int(doc["offset"])
        except (ValueError, KeyError, TypeError) as e:
            self._set_aside(f"cannot be read ({type(e).__name__}: {str(e)[:80]})")
            return None
        return doc

    def _set_aside(self, why: str) -> None:
        bad = f"{self.path}.bad"
        os.replace(self.path, bad)
        warnings.warn(f"{self.path} {why}; moved to {bad}; the policies start fresh", stacklevel=3)

    def restore(self, **policies: Policy | None) -> int | None:
        """Load each named policy's snapshot into it; returns the offset saved with them (None: nothing saved).

        A policy the file has no snapshot for, or a snapshot of another policy (the query was restarted with a
        different option), keeps its fresh state, with a warning for the latter: there is nothing to resume. So does a
        snapshot of the same policy that does not load (another version, a damaged value): what a policy learned
        is worth less than a query that keeps running."""
        doc = self.load()
        if doc is None:
            return None
        saved = doc.get("policies", {})
        for key, policy in policies.items():
            if policy is None or key not in saved:
                continue
            snap = saved[key]
            if isinstance(snap, dict) and snap.get("policy") != policy.name:
                warnings.warn(
                    f"{key}: saved state is of {snap.get('policy')!r}, the query now runs {policy.name!r}; "
                    "starting it fresh",
                    stacklevel=2,
                )
                continue
            fresh = policy.state_dict()
            try:
                policy.load_state_dict(snap)
            except (PolicyStateError, ValueError, KeyError, TypeError, AttributeError) as e:
                policy.load_state_dict(fresh)  # a snapshot that failed half-way leaves no half-loaded policy
                warnings.warn(f"{self.path}: {key} snapshot does not load ({e}); starting it fresh", stacklevel=2)
        return int(doc["offset"])
