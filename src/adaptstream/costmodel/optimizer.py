"""Cost-based initial placement (Costream Sec. V, Fig. 4).

Enumerate candidates under the rules of Fig. 5 (the data side's ``generate.enumerate_placements``), predict all
metrics for every candidate with an ensemble, drop candidates predicted to fail or to backpressure (each
ensemble's vote: majority, or mean probability where members of two GNNs are pooled), and pick the best
remaining one by the user's target: minimum processing or end-to-end latency, or maximum throughput. If every
candidate is predicted infeasible we say so in the decision (``fallback``) and choose among the least bad:
predicted-successful ones ignoring backpressure, then all.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from adaptstream.errors import CostModelError

TARGETS: dict[str, tuple[str, str]] = {
    "proc-latency": ("proc_latency_ms", "min"),
    "e2e-latency": ("e2e_latency_ms", "min"),
    "throughput": ("throughput", "max"),
}


class PlacementPredictor(Protocol):
    def predict_placements(
        self, query: Any, hosts: Sequence[Any], placements: Sequence[Mapping[str, str]]
    ) -> dict[str, np.ndarray]: ...


@dataclass(frozen=True)
class Candidate:
    placement: dict[str, str]
    predictions: dict[str, float]
    feasible: bool


@dataclass(frozen=True)
class PlacementDecision:
    target: str
    chosen: Candidate
    ranked: list[Candidate]  # all candidates, best first (feasible ones before infeasible ones)
    n_candidates: int
    n_feasible: int
    fallback: str = ""  # "" when the choice is predicted successful and free of backpressure
    rejected_by_rules: int = 0
    notes: list[str] = field(default_factory=list)


def parse_target(target: str) -> tuple[str, str]:
    key = target.strip().lower().replace("_", "-")
    key = {"lp": "proc-latency", "le": "e2e-latency", "t": "throughput"}.get(key, key)
    if key not in TARGETS:
        msg = f"unknown placement target {target!r}; valid choices: {', '.join(TARGETS)}"
        raise CostModelError(msg)
    return key, TARGETS[key][0]


class PlacementOptimizer:
    """Chooses a placement for one query on given hosts with a predictor (an ensemble or the flat
    baseline)."""

    def __init__(
        self,
        predictor: PlacementPredictor,
        target: str = "proc-latency",
        max_candidates: int = 200,
        seed: int = 0,
        include_initial: bool = True,
    ) -> None:
        self.predictor = predictor
        self.target, self.metric = parse_target(target)
        self.direction = TARGETS[self.target][1]
        if max_candidates < 1:
            msg = f"max_candidates must be >= 1, got {max_candidates}"
            raise CostModelError(msg)
        self.max_candidates = max_candidates
        self.seed = seed
        self.include_initial = include_initial

    def candidates(self, query: Any, hosts: Sequence[Any]) -> tuple[list[dict[str, str]], int]:
        """Distinct candidates obeying Fig. 5, plus how many enumerated ones failed the rule check."""
        from adaptstream.costmodel.generate import (
            enumerate_placements,
            initial_placement,
            placement_violations,
        )

        rng = np.random.default_rng(self.seed)
        found = enumerate_placements(query, hosts, limit=self.max_candidates, rng=rng)
        if self.include_initial:
            found = [initial_placement(query, hosts), *found]
        order = [op.id for op in query.operators]
        seen: dict[tuple[str, ...], dict[str, str]] = {}
        rejected = 0
        for p in found:
            if placement_violations(query, hosts, p):
                rejected += 1
                continue
            seen.setdefault(tuple(p[o] for o in order), dict(p))
        return list(seen.values()), rejected

    def optimize(self, query: Any, hosts: Sequence[Any]) -> PlacementDecision:
        placements, rejected = self.candidates(query, hosts)
        if not placements:
            msg = f"no placement of query {getattr(query, 'query_id', '?')!r} obeys the placement rules"
            raise CostModelError(msg)
        return self.choose(placements, self.predictor.predict_placements(query, hosts, placements), rejected)

    def choose(
        self, placements: Sequence[Mapping[str, str]], preds: Mapping[str, np.ndarray], rejected: int = 0
    ) -> PlacementDecision:
        n = len(placements)
        if self.metric not in preds:
            msg = f"the predictor has no model for the target metric {self.metric!r}"
            raise CostModelError(msg)
        value = np.asarray(preds[self.metric], dtype=np.float64)
        success = np.asarray(preds.get("success", np.ones(n)), dtype=bool)
        backpressure = np.asarray(preds.get("backpressure", np.zeros(n)), dtype=bool)
        feasible = success & ~backpressure
        notes = [f"no {m} model: not filtered on it" for m in ("success", "backpressure") if m not in preds]
        key = value if self.direction == "min" else -value
        if feasible.any():
            pool, fallback = feasible, ""
        elif success.any():
            pool, fallback = (
                success,
                "every candidate is predicted to backpressure; chose among successful ones",
            )
        else:
            pool, fallback = (
                np.ones(n, dtype=bool),
                "every candidate is predicted to fail; chose by target only",
            )
        # rank: pool members first by target, then the rest by target
        order = sorted(range(n), key=lambda i: (not pool[i], not feasible[i], key[i]))
        cands = [
            Candidate(
                dict(placements[i]),
                {m: float(np.asarray(v)[i]) for m, v in preds.items()},
                bool(feasible[i]),
            )
            for i in order
        ]
        return PlacementDecision(
            target=self.target,
            chosen=cands[0],
            ranked=cands,
            n_candidates=n,
            n_feasible=int(feasible.sum()),
            fallback=fallback,
            rejected_by_rules=rejected,
            notes=notes,
        )
