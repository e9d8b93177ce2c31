"""Numba building blocks shared by the partitioners: 64-bit mixing, an open-addressing int64 hash table.

Why numba: the online partitioners (PK, CM, AM, cAM, LM) decide per tuple, and a Python loop costs about
1 µs per iteration before doing any work; compiled loops keep the whole decision well under the 2 µs/tuple
target. All functions are `cache=True` so a process pays the compile cost once per machine.
"""

from __future__ import annotations

import numpy as np
from numba import njit

GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
EMPTY = np.int64(-(2**63))  # a key value the table reserves as "empty slot"


@njit(cache=True, inline="always")
def mix64(x: np.uint64, seed: np.uint64) -> np.uint64:
    """splitmix64 finaliser of x + seed * golden ratio: independent hash functions H_seed(k)."""
    z = x + seed * np.uint64(0x9E3779B97F4A7C15)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def mix64_np(keys: np.ndarray, seed: int) -> np.ndarray:
    """Vectorised mix64 over an int64 array (numpy uint64 arithmetic wraps, as intended)."""
    z = keys.astype(np.int64, copy=False).view(np.uint64) + np.uint64((seed * int(GOLDEN)) & 0xFFFFFFFFFFFFFFFF)
    z = (z ^ (z >> np.uint64(30))) * _M1
    z = (z ^ (z >> np.uint64(27))) * _M2
    return z ^ (z >> np.uint64(31))


def block_of(keys: np.ndarray, seed: int, num_blocks: int) -> np.ndarray:
    """Candidate block H_seed(k) mod V for every key (vectorised)."""
    return (mix64_np(keys, seed) % np.uint64(num_blocks)).astype(np.int32)


@njit(cache=True, inline="always")
def slot_of(tab_keys: np.ndarray, key: np.int64) -> np.int64:
    """Slot holding `key`, or the empty slot where it would go (linear probing; table is a power of 2)."""
    mask = np.uint64(tab_keys.shape[0] - 1)
    i = np.int64(mix64(np.uint64(key), np.uint64(7)) & mask)
    while True:
        k = tab_keys[i]
        if k == key or k == EMPTY:  # noqa: SIM109 - numba
            return i
        i = np.int64((np.uint64(i) + np.uint64(1)) & mask)


@njit(cache=True)
def rehash(old_keys: np.ndarray, old_vals: np.ndarray, new_keys: np.ndarray, new_vals: np.ndarray) -> None:
    for j in range(old_keys.shape[0]):
        k = old_keys[j]
        if k != EMPTY:
            s = slot_of(new_keys, k)
            new_keys[s] = k
            new_vals[s] = old_vals[j]


class IntTable:
    """Growable int64 -> int64 hash table whose arrays are passed to numba kernels.

    The key -(2**63) is reserved as the empty marker; key_hash never produces it in practice (probability
    2**-64 per key) and the constructor of a batch maps it to -(2**63)+1 if it ever does.
    """

    def __init__(self, capacity: int = 1024) -> None:
        cap = 1 << max(4, int(capacity - 1).bit_length())
        self.keys = np.full(cap, EMPTY, dtype=np.int64)
        self.vals = np.zeros(cap, dtype=np.int64)
        self.size = 0

    def reserve(self, extra: int) -> None:
        """Keep the load factor <= 0.5 after `extra` more insertions."""
        need = 2 * (self.size + extra)
        if need <= self.keys.shape[0]:
            return
        cap = 1 << int(need - 1).bit_length()
        new_keys = np.full(cap, EMPTY, dtype=np.int64)
        new_vals = np.zeros(cap, dtype=np.int64)
        rehash(self.keys, self.vals, new_keys, new_vals)
        self.keys, self.vals = new_keys, new_vals

    def clear(self) -> None:
        self.keys.fill(EMPTY)
        self.vals.fill(0)
        self.size = 0

    def items(self) -> tuple[np.ndarray, np.ndarray]:
        """The occupied (key, value) pairs, in slot order (the snapshot of the table's content)."""
        used = self.keys != EMPTY
        return self.keys[used].copy(), self.vals[used].copy()

    def load(self, keys: np.ndarray, vals: np.ndarray) -> None:
        """Replace the content with these distinct (key, value) pairs."""
        keys = np.ascontiguousarray(keys, dtype=np.int64)
        vals = np.ascontiguousarray(vals, dtype=np.int64)
        if keys.shape != vals.shape or (keys == EMPTY).any():
            msg = "IntTable.load needs equally long key and value arrays without the empty marker"
            raise ValueError(msg)
        self.clear()
        self.reserve(len(keys))
        rehash(keys, vals, self.keys, self.vals)
        self.size = int((self.keys != EMPTY).sum())
        if self.size != len(keys):
            msg = "IntTable.load got duplicate keys"
            raise ValueError(msg)

    @property
    def nbytes(self) -> int:
        return int(self.keys.nbytes + self.vals.nbytes)


def sanitize_keys(keys: np.ndarray) -> np.ndarray:
    """int64 contiguous copy-free view of the keys, with the reserved empty marker remapped."""
    out = np.ascontiguousarray(keys, dtype=np.int64)
    if out.size and (out == EMPTY).any():
        out = out.copy()
        out[out == EMPTY] = EMPTY + 1
    return out
