"""Prompt's batch partitioner (Abdelhamid et al., Prompt, Sec. 4-5).

- Frequency-aware buffering (Alg. 1): while the batch buffers, `observe` keeps HTable (exact per-key counts,
  standing in for the tuple chains) and CountTree (approximate counts refreshed at most `budget` times per
  key, when f.step new tuples or t.step seconds have passed since the key's last update).
- B-BPFI (Alg. 2): keys larger than S_cut = P_size / P_|k| (= N/K) put an S_cut fragment in blocks
  round-robin and park the residual; the other keys are dealt zig-zag over the blocks in quasi-sorted
  order; residuals are then placed best-fit, home block first (key locality). A final trim keeps every
  block at exactly floor(N/P) or ceil(N/P) tuples (the paper's Def. 1 requirement |b_j| = C), splitting
  the last-placed fragments of an over-full block when the zig-zag overshoots.
- Early batch release (Sec. 4.2, Fig. 7): `release(P)` computes the plan from the statistics so far, before
  the heartbeat; `assign` then only maps rows to planned fragments (one O(n) compiled pass); tuples that
  arrived after the release go to their home block while it has room, else to the emptiest block.
- Reduce-bucket worst-fit (Alg. 3) lives in :mod:`adaptstream.allocation` (`worst_fit_buckets`); the pane
  execution mode (:mod:`adaptstream.spark.pane`) applies it inside Spark jobs.

Deviation: CountTree is an array of approximate counts, and its in-order traversal is a numpy argsort at
release time (O(K log K), measured by benchmarks/partitioning_cost.py), not a literal balanced BST.

State across batches is bounded: the last `history` batch sizes and key counts (N_est, K_avg) and a decision log
of the last LOG_LIMIT batches; arrival times within a batch come from the injected clock, the plan/cut costs it
logs from the real perf_counter (they measure work, not decisions).
"""

from __future__ import annotations

import time as _time
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
from numba import njit

from adaptstream.errors import PartitioningError
from adaptstream.partitioning._kernels import IntTable, sanitize_keys, slot_of
from adaptstream.partitioning.base import LOG_LIMIT, Partitioner, check_args
from adaptstream.policy import Clock


# ----------------------------------------------------------------------------------------- Alg. 1
@njit(cache=True)
def _observe_kernel(
    keys,
    now,
    t_end,
    tab_keys,
    tab_vals,
    box,
    freq_cur,
    freq_upd,
    budget_left,
    f_step,
    t_step,
    last_upd,
    tree_count,
    budget0,
    f0,
    n_est,
    row_kid,
):
    """box = [N_C, K, tree_updates]."""
    for i in range(keys.shape[0]):
        k = keys[i]
        box[0] += 1
        s = slot_of(tab_keys, k)
        if tab_keys[s] == k:
            kid = tab_vals[s]
            row_kid[i] = kid
            freq_cur[kid] += 1
            if budget_left[kid] <= 0:
                continue  # budget spent: not eligible for more CountTree updates this batch
            dfreq = freq_cur[kid] - freq_upd[kid]
            dtime = now - last_upd[kid]
            if dfreq >= f_step[kid]:
                tree_count[kid] = freq_cur[kid]
                budget_left[kid] -= 1
                freq_upd[kid] = freq_cur[kid]
                last_upd[kid] = now
                box[2] += 1
                if budget_left[kid] > 0:
                    f_step[kid] = (n_est / budget_left[kid]) * freq_cur[kid] / box[0]
            elif dtime >= t_step[kid]:
                tree_count[kid] = freq_cur[kid]
                budget_left[kid] -= 1
                freq_upd[kid] = freq_cur[kid]
                last_upd[kid] = now
                box[2] += 1
                if budget_left[kid] > 0:
                    t_step[kid] = (t_end - now) / budget_left[kid]
        else:
            kid = box[1]
            row_kid[i] = kid
            box[1] += 1
            tab_keys[s] = k
            tab_vals[s] = kid
            freq_cur[kid] = 1
            freq_upd[kid] = 1
            tree_count[kid] = 1
            budget_left[kid] = budget0
            t_step[kid] = (t_end - now) / budget0
            f_step[kid] = f0
            last_upd[kid] = now


# ----------------------------------------------------------------------------------------- Alg. 2
@njit(cache=True)
def _place_residuals(res_key, res_size, res_home, rem, out_key, out_block, out_size):
    """Best-fit placement of residual fragments (Alg. 2 lines 17-24); returns the number of fragments."""
    n = 0
    nb = rem.shape[0]
    for i in range(res_key.shape[0]):
        r = res_size[i]
        b = res_home[i]
        if b >= 0 and rem[b] > 0:
            take = min(r, rem[b])
            out_key[n] = res_key[i]
            out_block[n] = b
            out_size[n] = take
            n += 1
            rem[b] -= take
            r -= take
        while r > 0:
            best = -1
            for j in range(nb):  # lowest remaining capacity that can hold the rest
                if rem[j] >= r and (best < 0 or rem[j] < rem[best]):
                    best = j
            if best < 0:  # nothing holds it whole: fill the emptiest block and go on
                for j in range(nb):
                    if best < 0 or rem[j] > rem[best]:
                        best = j
            take = min(r, rem[best])
            if take <= 0:
                break
            out_key[n] = res_key[i]
            out_block[n] = best
            out_size[n] = take
            n += 1
            rem[best] -= take
            r -= take
    return n


def bbpfi_plan(order: np.ndarray, sizes: np.ndarray, num_blocks: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """B-BPFI heuristic (Prompt Alg. 2) over keys given in (quasi-)descending order.

    order: key ids in the CountTree's in-order traversal; sizes[id]: exact tuple count of key id.
    Returns fragments (key id, block, size) whose per-block sums are floor/ceil(N/P).
    """
    p = int(num_blocks)
    sz = sizes[order].astype(np.int64)
    n_total = int(sz.sum())
    k_total = len(order)
    cap = np.full(p, n_total // p, dtype=np.int64)
    cap[: n_total % p] += 1
    if k_total == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64)
    s_cut = (n_total / p) / (k_total / p)  # P_Size / P_|k| (Alg. 2 lines 1-3)
    frag = max(1, int(s_cut))
    big = sz > s_cut
    big_ids, big_sz = order[big], sz[big]
    heads_block = (np.arange(len(big_ids)) % p).astype(np.int64)  # lines 5-9: round-robin b_i
    small_ids, small_sz = order[~big], sz[~big]
    i = np.arange(len(small_ids))
    pos, lap = i % p, i // p
    small_block = np.where(lap % 2 == 0, pos, p - 1 - pos).astype(np.int64)  # lines 10-16: zig-zag
    f_key = np.concatenate([big_ids, small_ids]).astype(np.int64)
    f_block = np.concatenate([heads_block, small_block])
    f_size = np.concatenate([np.full(len(big_ids), frag, np.int64), small_sz])
    f_key, f_block, f_size, spill_key, spill_size = _trim_overfull(f_key, f_block, f_size, cap)
    load = np.bincount(f_block, weights=f_size, minlength=p).astype(np.int64)
    rem = cap - load
    res_key = np.concatenate([big_ids, spill_key]).astype(np.int64)
    res_size = np.concatenate([big_sz - frag, spill_size]).astype(np.int64)
    res_home = np.concatenate([heads_block, np.full(len(spill_key), -1, np.int64)])
    keep = res_size > 0
    res_key, res_size, res_home = res_key[keep], res_size[keep], res_home[keep]
    # RList order is not fixed by Alg. 2; smallest residuals first lets them land in their home block (key
    # locality, no new fragment), and the few largest residuals then fill the remaining capacity.
    asc = np.argsort(res_size, kind="stable")
    res_key, res_size, res_home = res_key[asc], res_size[asc], res_home[asc]
    m = len(res_key) + 2 * p + 8
    ok, ob, os_ = np.empty(m * 2, np.int64), np.empty(m * 2, np.int64), np.empty(m * 2, np.int64)
    n = _place_residuals(res_key, res_size, res_home, rem, ok, ob, os_)
    return (
        np.concatenate([f_key, ok[:n]]),
        np.concatenate([f_block, ob[:n]]),
        np.concatenate([f_size, os_[:n]]),
    )


def _trim_overfull(f_key, f_block, f_size, cap):
    """Move the excess of over-full blocks (last-placed fragments first) to a spill list."""
    p = len(cap)
    load = np.bincount(f_block, weights=f_size, minlength=p).astype(np.int64)
    over = np.nonzero(load > cap)[0]
    if len(over) == 0:
        return f_key, f_block, f_size, np.zeros(0, np.int64), np.zeros(0, np.int64)
    f_size = f_size.copy()
    spill_k: list[np.ndarray] = []
    spill_s: list[np.ndarray] = []
    for b in over:
        idx = np.nonzero(f_block == b)[0][::-1]
        excess = int(load[b] - cap[b])
        csum = np.cumsum(f_size[idx])
        cut = int(np.searchsorted(csum, excess))  # fragments idx[:cut] go whole, idx[cut] partly
        whole = idx[:cut]
        moved_part = excess - (int(csum[cut - 1]) if cut > 0 else 0)
        spill_k.append(f_key[whole])
        spill_s.append(f_size[whole].copy())
        f_size[whole] = 0
        if moved_part > 0:
            j = idx[cut]
            spill_k.append(f_key[j : j + 1])
            spill_s.append(np.array([moved_part], np.int64))
            f_size[j] -= moved_part
    keep = f_size > 0
    return f_key[keep], f_block[keep], f_size[keep], np.concatenate(spill_k), np.concatenate(spill_s)


# ----------------------------------------------------------------------------------------- row mapping
@njit(cache=True)
def _map_rows(kids, n_planned, frag_start, frag_count, frag_block, frag_size, cap_final, out):
    """Rows in arrival order -> planned fragment of their key; late rows -> home block, else emptiest."""
    nk = frag_start.shape[0]
    cursor = np.zeros(nk, dtype=np.int64)  # fragment index within the key
    used = np.zeros(nk, dtype=np.int64)  # tuples taken from the current fragment
    load = np.zeros(cap_final.shape[0], dtype=np.int64)
    misses = 0
    for i in range(kids.shape[0]):
        kid = kids[i]
        b = -1
        if kid >= 0 and kid < nk and i < n_planned:
            while cursor[kid] < frag_count[kid] and used[kid] >= frag_size[frag_start[kid] + cursor[kid]]:
                cursor[kid] += 1
                used[kid] = 0
            if cursor[kid] < frag_count[kid]:
                b = frag_block[frag_start[kid] + cursor[kid]]
                used[kid] += 1
        if b < 0 or load[b] >= cap_final[b]:
            if b < 0 and i < n_planned:
                misses += 1
            home = frag_block[frag_start[kid]] if (kid >= 0 and kid < nk and frag_count[kid] > 0) else -1
            if home >= 0 and load[home] < cap_final[home]:
                b = home
            else:
                b = 0
                for j in range(cap_final.shape[0]):
                    if cap_final[j] - load[j] > cap_final[b] - load[b]:
                        b = j
        load[b] += 1
        out[i] = b
    return misses


@njit(cache=True)
def _lookup_ids(tab_keys, tab_vals, keys):
    out = np.full(keys.shape[0], -1, dtype=np.int64)
    for i in range(keys.shape[0]):
        s = slot_of(tab_keys, keys[i])
        if tab_keys[s] == keys[i]:
            out[i] = tab_vals[s]
    return out


# ----------------------------------------------------------------------------------------- partitioner
class PromptPartitioner(Partitioner):
    """Frequency-aware buffering + B-BPFI + early batch release (see module docstring)."""

    name = "prompt"

    def __init__(
        self,
        budget: int = 8,
        batch_interval_s: float = 1.0,
        history: int = 3,
        release_fraction: float = 0.95,
        clock: Clock | None = None,
    ) -> None:
        if budget < 1:
            msg = f"budget must be >= 1, got {budget}"
            raise PartitioningError(msg)
        if history < 1:
            msg = f"history must be >= 1 batch, got {history}"
            raise PartitioningError(msg)
        if batch_interval_s <= 0 or not 0 < release_fraction <= 1:
            msg = f"need batch_interval_s > 0 and 0 < release_fraction <= 1, got {batch_interval_s}, {release_fraction}"
            raise PartitioningError(msg)
        if clock is not None:
            self.clock = clock
        self.budget = int(budget)
        self.batch_interval_s = float(batch_interval_s)
        self.history = int(history)
        self.release_fraction = float(release_fraction)
        self._past_n: deque[int] = deque(maxlen=self.history)  # N_est = the last batch's size
        self._past_k: deque[int] = deque(maxlen=self.history)  # K_avg = mean keys of the last `history` batches
        self._log: deque[dict[str, Any]] = deque(maxlen=LOG_LIMIT)
        self._reset_batch()

    def set_clock(self, clock: Clock) -> Partitioner:
        """The buffering batch's times restart at 0 on the new clock (readings of different clocks do not compare)."""
        self.clock = clock
        self._t0 = clock()
        return self

    def _state(self) -> dict[str, Any]:
        return {"past_n": list(self._past_n), "past_k": list(self._past_k)}

    def _load_state(self, state: Mapping[str, Any]) -> None:
        self._past_n = deque((int(x) for x in state["past_n"]), maxlen=self.history)
        self._past_k = deque((int(x) for x in state["past_k"]), maxlen=self.history)
        self._reset_batch()  # N_est, K_avg and f0 of the next batch come from the restored history

    # -- buffering (Alg. 1)
    def _reset_batch(self) -> None:
        self._table = IntTable()
        self._box = np.zeros(3, dtype=np.int64)
        cap = 1024
        self._freq_cur = np.zeros(cap, np.int64)
        self._freq_upd = np.zeros(cap, np.int64)
        self._budget_left = np.zeros(cap, np.int64)
        self._f_step = np.zeros(cap, np.float64)
        self._t_step = np.zeros(cap, np.float64)
        self._last_upd = np.zeros(cap, np.float64)
        self._tree = np.zeros(cap, np.int64)
        self._row_kid = np.zeros(1024, np.int64)
        self._t0 = self.clock()
        self._plan: tuple[Any, ...] | None = None
        self._plan_seconds = 0.0
        n_est = self._past_n[-1] if self._past_n else 0
        k_avg = float(np.mean(self._past_k)) if self._past_k else 0.0
        self._n_est = float(n_est)
        self._f0 = n_est / (k_avg * self.budget) if k_avg > 0 else 1.0  # f = N_est / (K_avg * budget)

    def _grow(self, extra: int) -> None:
        need = int(self._box[1]) + extra
        if need <= len(self._freq_cur):
            return
        cap = 1 << int(need - 1).bit_length()
        for name in ("_freq_cur", "_freq_upd", "_budget_left", "_f_step", "_t_step", "_last_upd", "_tree"):
            old = getattr(self, name)
            new = np.zeros(cap, old.dtype)
            new[: len(old)] = old
            setattr(self, name, new)

    def observe(self, keys: np.ndarray, now: float | None = None) -> None:
        """Buffer statistics of arriving tuples; `now`: seconds since the batch started (default: clock)."""
        keys = sanitize_keys(check_args(keys, 1))
        t = (self.clock() - self._t0) if now is None else float(now)
        for lo in range(0, len(keys), 1 << 16):
            chunk = keys[lo : lo + (1 << 16)]
            self._table.reserve(len(chunk))
            self._grow(len(chunk))
            start = int(self._box[0])
            if start + len(chunk) > len(self._row_kid):
                grown = np.zeros(max(2 * len(self._row_kid), start + len(chunk)), np.int64)
                grown[:start] = self._row_kid[:start]
                self._row_kid = grown
            _observe_kernel(
                chunk,
                t,
                self.batch_interval_s,
                self._table.keys,
                self._table.vals,
                self._box,
                self._freq_cur,
                self._freq_upd,
                self._budget_left,
                self._f_step,
                self._t_step,
                self._last_upd,
                self._tree,
                self.budget,
                self._f0,
                self._n_est,
                self._row_kid[start : start + len(chunk)],
            )
            self._table.size = int(self._box[1])

    @property
    def observed(self) -> int:
        return int(self._box[0])

    @property
    def tree_updates(self) -> int:
        """CountTree updates so far this batch (bounded by K * budget)."""
        return int(self._box[2])

    # -- planning (Alg. 2 + early batch release)
    def release(self, num_blocks: int) -> float:
        """Early batch release: plan the blocks from the statistics so far; returns planning seconds (measured
        with perf_counter, not the injected clock: it is the cost of the work)."""
        t = _time.perf_counter()
        k = int(self._box[1])
        order = np.argsort(-self._tree[:k], kind="stable")  # in-order traversal of CountTree
        f_key, f_block, f_size = bbpfi_plan(order, self._freq_cur[:k], num_blocks)
        srt = np.argsort(f_key, kind="stable")
        f_key, f_block, f_size = f_key[srt], f_block[srt], f_size[srt]
        frag_start = np.searchsorted(f_key, np.arange(k)).astype(np.int64)
        frag_count = (np.searchsorted(f_key, np.arange(k), side="right") - frag_start).astype(np.int64)
        self._plan = (num_blocks, int(self._box[0]), frag_start, frag_count, f_block, f_size)
        self._plan_seconds = _time.perf_counter() - t
        return self._plan_seconds

    def _same_rows(self, keys: np.ndarray, samples: int = 256) -> bool:
        """Spot-check that `keys` are the rows observed, in order (the source's contract): the row -> key id
        array recorded while buffering replaces a hash lookup per row at the cut."""
        idx = np.random.default_rng(len(keys)).integers(0, len(keys), min(samples, len(keys)))
        slots = _lookup_ids(self._table.keys, self._table.vals, keys[idx])
        return bool(np.array_equal(slots, self._row_kid[idx]))

    def assign(self, keys: np.ndarray, num_blocks: int) -> np.ndarray:
        keys = sanitize_keys(check_args(keys, num_blocks))
        t = _time.perf_counter()
        mode = "early-release"
        if self.observed == 0 or self.observed != len(keys) or not self._same_rows(keys):
            mode = "post-sort (observed rows did not match the batch)" if self.observed else "post-sort"
            self._reset_batch()
            self.observe(keys, now=0.0)
            # no arrival-time statistics: exact counts, exact sort (Prompt Fig. 14a "post-sort")
            self._tree[: self._box[1]] = self._freq_cur[: self._box[1]]
            self.release(num_blocks)
        elif self._plan is None or self._plan[0] != num_blocks:
            self.release(num_blocks)
            mode = "plan-at-cut"
        plan_s = self._plan_seconds
        _, n_planned, frag_start, frag_count, f_block, f_size = self._plan  # type: ignore[misc]
        n = len(keys)
        cap = np.full(num_blocks, n // num_blocks, dtype=np.int64)
        cap[: n % num_blocks] += 1
        out = np.empty(n, dtype=np.int32)
        misses = _map_rows(
            self._row_kid[:n],
            n_planned,
            frag_start,
            frag_count,
            f_block,
            f_size,
            cap,
            out,
        )
        self._log.append(
            {
                "rows": n,
                "keys": int(self._box[1]),
                "mode": mode,
                "planned_rows": n_planned,
                "plan_s": plan_s,
                "cut_s": _time.perf_counter() - t,
                "tree_updates": self.tree_updates,
                "misses": int(misses),
            }
        )
        self._last_memory = self.memory_bytes()
        self._past_n.append(n)
        self._past_k.append(int(self._box[1]))
        self._reset_batch()
        return out

    def decision_log(self) -> list[dict[str, Any]]:
        return list(self._log)

    def memory_bytes(self) -> int:
        arrays = (
            self._row_kid,
            self._freq_cur,
            self._freq_upd,
            self._budget_left,
            self._f_step,
            self._t_step,
            self._last_upd,
            self._tree,
        )
        current = self._table.nbytes + sum(int(a.nbytes) for a in arrays)
        return max(current, getattr(self, "_last_memory", 0))


@dataclass(frozen=True)
class PromptConfig:
    """budget: CountTree updates per key per batch (Alg. 1); batch_interval_s: t_end for t.step;
    history: batches averaged for K_avg; release_fraction: share of the interval after which a source should
    call release() (early batch release, Fig. 7; the paper observed <= 5% of the interval suffices)."""

    budget: int = 8
    batch_interval_s: float = 1.0
    history: int = 3
    release_fraction: float = 0.95

    def build(self) -> Partitioner:
        return PromptPartitioner(self.budget, self.batch_interval_s, self.history, self.release_fraction)
