"""The per-tuple key-splitting partitioners of the holistic paper (Alg. 1-5) and PK, in one numba loop.

Every tuple's key is fed to `choices` independent hash functions H_1..H_d (holistic Alg. 1 lines 6-7);
`decide` then picks one candidate:

- PK  (Nasir et al., as described in holistic Sec. 2.4): least tuple count L.
- CM  (holistic Alg. 2): least cardinality estimate C.estimate().
- AM  (holistic Alg. 3): a candidate that already holds the key, else least cardinality.
- cAM (holistic Alg. 4): a candidate that already holds the key, else least tuple count.
- LM  (holistic Alg. 5): least hybrid load p*L' + (1-p)*CL' with min-max normalised L and CL (Eq. 7-9).

Cardinality structures (holistic Sec. 3.2): "exact" keeps one table key -> bitmask of blocks that received
it (equivalent to V unordered sets, O(1) update/contains); "hll" keeps V HyperLogLog sketches with the
paper's optimistic contains (estimate, trial update, compare: Sec. 3.2.2).

State is bounded by the window: with window="batch" nothing carries over between batches; with "explicit" the
cardinality statistics span until on_window_boundary() (the exact table holds the window's distinct keys, the HLL
sketches a fixed V * 2**bits bytes), and that is what state_dict() saves.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
from numba import njit

from adaptstream.errors import PartitioningError
from adaptstream.partitioning._kernels import IntTable, mix64, sanitize_keys, slot_of
from adaptstream.partitioning.base import Partitioner, check_args
from adaptstream.partitioning.hll import BlockHLL, hll_estimate, hll_index_rank
from adaptstream.policy import decode_array, encode_array

MODE_PK, MODE_CM, MODE_AM, MODE_CAM, MODE_LM = 0, 1, 2, 3, 4
MAX_EXACT_BLOCKS = 63  # exact mode stores the blocks of a key as bits of one int64
CHUNK = 1 << 16


@njit(cache=True)
def _card(c, exact, card, hz, hzeros, m, alpha_m):
    if exact:
        return float(card[c])
    return hll_estimate(hz[c], hzeros[c], m, alpha_m)


@njit(cache=True)
def _online_kernel(
    keys,
    out,
    num_blocks,
    choices,
    mode,
    p,
    loads,
    card,
    exact,
    tab_keys,
    tab_vals,
    size_box,
    regs,
    hz,
    hzeros,
    bits,
    alpha_m,
):
    m = 1 << bits
    use_table = exact and mode != MODE_PK
    cand = np.empty(choices, dtype=np.int64)
    for i in range(keys.shape[0]):
        k = keys[i]
        for j in range(choices):
            cand[j] = np.int64(mix64(np.uint64(k), np.uint64(j + 1)) % np.uint64(num_blocks))
        slot = -1
        mask = np.int64(0)
        if use_table:
            slot = slot_of(tab_keys, k)
            if tab_keys[slot] == k:
                mask = tab_vals[slot]
        chosen = -1
        if mode == MODE_AM or mode == MODE_CAM:  # noqa: SIM109 - group affinity: a candidate that already holds k
            for j in range(choices):
                c = cand[j]
                if exact:
                    if (mask >> c) & 1:
                        chosen = c
                        break
                else:
                    idx, rank = hll_index_rank(k, bits)
                    old = regs[c, idx]
                    if rank <= old:
                        chosen = c
                        break
                    before = hll_estimate(hz[c], hzeros[c], m, alpha_m)
                    after = hll_estimate(
                        hz[c] + 2.0 ** (-rank) - 2.0 ** (-np.int64(old)),
                        hzeros[c] - (1 if old == 0 else 0),
                        m,
                        alpha_m,
                    )
                    if after == before:  # optimistic: estimate unchanged -> assume already sent
                        chosen = c
                        break
        if chosen < 0:
            best = 1e300
            if mode == MODE_LM:
                lmin = loads.min()
                lmax = loads.max()
                cmin = 1e300
                cmax = -1.0
                for b in range(num_blocks):
                    v = _card(b, exact, card, hz, hzeros, m, alpha_m)
                    cmin = min(cmin, v)
                    cmax = max(cmax, v)
            for j in range(choices):
                c = cand[j]
                if mode == MODE_PK or mode == MODE_CAM:  # noqa: SIM109
                    score = float(loads[c])
                elif mode == MODE_CM or mode == MODE_AM:  # noqa: SIM109
                    score = _card(c, exact, card, hz, hzeros, m, alpha_m)
                else:
                    ln = (loads[c] - lmin) / (lmax - lmin) if lmax > lmin else 0.0
                    cv = _card(c, exact, card, hz, hzeros, m, alpha_m)
                    cn = (cv - cmin) / (cmax - cmin) if cmax > cmin else 0.0
                    score = p * ln + (1.0 - p) * cn
                if score < best:
                    best = score
                    chosen = c
            if mode != MODE_PK:  # C[chosen].update(k)
                if exact:
                    if tab_keys[slot] != k:
                        tab_keys[slot] = k
                        tab_vals[slot] = 0
                        size_box[0] += 1
                    if not (tab_vals[slot] >> chosen) & 1:
                        tab_vals[slot] |= np.int64(1) << chosen
                        card[chosen] += 1
                else:
                    idx, rank = hll_index_rank(k, bits)
                    old = regs[chosen, idx]
                    if rank > old:
                        hz[chosen] += 2.0 ** (-rank) - 2.0 ** (-np.int64(old))
                        if old == 0:
                            hzeros[chosen] -= 1
                        regs[chosen, idx] = rank
        loads[chosen] += 1
        out[i] = chosen


class OnlinePartitioner(Partitioner):
    """Per-tuple d-choice partitioner; statistics live for one batch (default) or until on_window_boundary."""

    def __init__(
        self,
        name: str,
        mode: int,
        choices: int,
        cardinality: str = "exact",
        p: float = 0.5,
        window: str = "batch",
        hll_bits: int = 12,
    ) -> None:
        if cardinality not in ("exact", "hll"):
            msg = f"cardinality must be 'exact' or 'hll', got {cardinality!r}"
            raise PartitioningError(msg)
        if window not in ("batch", "explicit"):
            msg = f"window must be 'batch' or 'explicit', got {window!r}"
            raise PartitioningError(msg)
        if choices < 1:
            msg = f"choices must be >= 1, got {choices}"
            raise PartitioningError(msg)
        self.name = name
        self.mode = mode
        self.choices = choices
        self.cardinality = cardinality
        self.p = float(p)
        self.window = window
        self.hll_bits = hll_bits
        self._blocks = 0
        self._table = IntTable()
        self._hll: BlockHLL | None = None
        self._loads = np.zeros(0, dtype=np.int64)
        self._card = np.zeros(0, dtype=np.int64)

    def _ensure(self, num_blocks: int) -> None:
        if self.cardinality == "exact" and self.mode != MODE_PK and num_blocks > MAX_EXACT_BLOCKS:
            msg = f"{self.name} with exact cardinality supports at most {MAX_EXACT_BLOCKS} blocks"
            raise PartitioningError(msg)
        if num_blocks != self._blocks:
            self._blocks = num_blocks
            self._loads = np.zeros(num_blocks, dtype=np.int64)
            self._card = np.zeros(num_blocks, dtype=np.int64)
            self._table.clear()
            self._hll = BlockHLL(num_blocks, self.hll_bits) if self.cardinality == "hll" else None

    def on_window_boundary(self) -> None:
        self._loads.fill(0)
        self._card.fill(0)
        self._table.clear()
        if self._hll is not None:
            self._hll.reset()

    def assign(self, keys: np.ndarray, num_blocks: int) -> np.ndarray:
        keys = sanitize_keys(check_args(keys, num_blocks))
        self._ensure(num_blocks)
        if self.window == "batch":
            self.on_window_boundary()
        else:
            self._loads.fill(0)  # tuple counts L are per block = per batch; cardinalities span the window
        out = np.empty(len(keys), dtype=np.int32)
        exact = self.cardinality == "exact"
        hll = self._hll if self._hll is not None else BlockHLL(1, 4)
        size_box = np.zeros(1, dtype=np.int64)
        for lo in range(0, len(keys), CHUNK):
            chunk = keys[lo : lo + CHUNK]
            if exact and self.mode != MODE_PK:
                self._table.reserve(len(chunk))
            size_box[0] = self._table.size
            _online_kernel(
                chunk,
                out[lo : lo + CHUNK],
                num_blocks,
                self.choices,
                self.mode,
                self.p,
                self._loads,
                self._card,
                exact,
                self._table.keys,
                self._table.vals,
                size_box,
                hll.regs,
                hll.z,
                hll.zeros,
                hll.bits,
                hll.alpha_m,
            )
            self._table.size = int(size_box[0])
        return out

    def memory_bytes(self) -> int:
        if self.mode == MODE_PK:
            return int(self._loads.nbytes)
        if self.cardinality == "hll" and self._hll is not None:
            return self._hll.nbytes + int(self._loads.nbytes)
        return self._table.nbytes + int(self._loads.nbytes + self._card.nbytes)

    def distinct_keys_tracked(self) -> int:
        return self._table.size

    def _state(self) -> dict[str, Any]:
        state: dict[str, Any] = {"blocks": self._blocks}
        if self.window == "explicit" and self._blocks:  # "batch" resets everything at the next assign
            state["card"] = encode_array(self._card)
            keys, vals = self._table.items()
            state["table_keys"], state["table_vals"] = encode_array(keys), encode_array(vals)
            if self._hll is not None:
                state["hll"] = {
                    "regs": encode_array(self._hll.regs),
                    "z": encode_array(self._hll.z),
                    "zeros": encode_array(self._hll.zeros),
                }
        return state

    def _load_state(self, state: Mapping[str, Any]) -> None:
        blocks = int(state["blocks"])
        self._blocks = 0
        if blocks:
            self._ensure(blocks)
        if "card" not in state:
            return
        card = decode_array(state["card"])
        if card.shape != (blocks,):
            msg = f"card has shape {card.shape}, expected ({blocks},)"
            raise ValueError(msg)
        self._card = card.astype(np.int64)
        self._table.load(decode_array(state["table_keys"]), decode_array(state["table_vals"]))
        if self._hll is not None:
            hll = state["hll"]
            regs = decode_array(hll["regs"])
            if regs.shape != self._hll.regs.shape:
                msg = f"HLL registers have shape {regs.shape}, expected {self._hll.regs.shape}"
                raise ValueError(msg)
            self._hll.regs = regs.astype(np.uint8)
            self._hll.z = decode_array(hll["z"]).astype(np.float64)
            self._hll.zeros = decode_array(hll["zeros"]).astype(np.int64)
