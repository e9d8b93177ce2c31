"""Operator backends for device mapping: each operator of the Table III queries as a function over one data
partition, with a CPU implementation (pyarrow compute / numpy) and a GPU implementation (CuPy).

A partition is a :class:`pyarrow.Table` on the host and a :class:`GpuTable` (column name -> CuPy array) on the GPU;
:func:`to_gpu` / :func:`to_host` are the transitions whose cost Eq. 9 models. GPU columns are numeric (int64,
float64): the Table III queries group and join on integer keys. CuPy instead of cuDF: see docs/mapdevice.md (the
lent GPU machines have CuPy and no network to install cuDF). Results of both backends are equal as multisets
(floating-point sums may differ in the last bits: compare with a tolerance). On the GPU a null float is NaN, so
a genuine NaN value counts as null there; integer columns with nulls are refused (their type would change).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from adaptstream.errors import AdaptstreamError, ConfigError

GpuTable = dict[str, Any]


class DeviceUnavailable(AdaptstreamError):
    """A GPU function was asked for where CuPy or a CUDA device is missing."""


def gpu_available() -> bool:
    """True when CuPy imports and sees a CUDA device."""
    try:
        import cupy

        return cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:
        return False


def _cp():
    try:
        import cupy
    except ImportError as e:
        msg = "the GPU backend needs CuPy and a CUDA GPU (pip install 'adaptstream[gpu]')"
        raise DeviceUnavailable(msg) from e
    return cupy


def to_gpu(t: pa.Table) -> GpuTable:
    """Numeric columns to the GPU (a null becomes NaN); a non-numeric column is an error, never dropped."""
    bad = [f.name for f in t.schema if not (pa.types.is_integer(f.type) or pa.types.is_floating(f.type))]
    if bad:
        msg = f"the GPU backend takes numeric columns only; select the columns the query reads first: {bad}"
        raise ConfigError(msg)
    nulls = [f.name for f in t.schema if pa.types.is_integer(f.type) and t.column(f.name).null_count]
    if nulls:
        msg = f"the GPU backend cannot hold nulls in integer columns (they would become float): {nulls}"
        raise ConfigError(msg)
    cp = _cp()
    return {n: cp.asarray(t.column(n).to_numpy()) for n in t.column_names}


def to_host(g: GpuTable) -> pa.Table:
    """Back to Arrow; NaN becomes null again (to_gpu turned nulls into NaN)."""
    cp = _cp()
    return pa.table({n: pa.array(cp.asnumpy(a), from_pandas=True) for n, a in g.items()})


def synchronize() -> None:
    _cp().cuda.Stream.null.synchronize()


_CMP = {"<": "less", "<=": "less_equal", ">": "greater", ">=": "greater_equal", "==": "equal"}


class Operator:
    """One operator: ``cpu(table) -> table`` and ``gpu(gpu_table) -> gpu_table`` compute the same rows."""

    name: str = "op"
    kind: str = "project"

    def cpu(self, t: pa.Table) -> pa.Table:
        raise NotImplementedError

    def gpu(self, g: GpuTable) -> GpuTable:
        raise NotImplementedError


@dataclass(frozen=True)
class Filter(Operator):
    column: str
    op: str
    value: float
    name: str = "filter"
    kind: str = "filter"

    def __post_init__(self) -> None:
        if self.op not in _CMP:
            msg = f"unknown comparison {self.op!r}; valid choices: {', '.join(_CMP)}"
            raise ConfigError(msg)

    def cpu(self, t: pa.Table) -> pa.Table:
        return t.filter(getattr(pc, _CMP[self.op])(t.column(self.column), self.value))

    def gpu(self, g: GpuTable) -> GpuTable:
        cp = _cp()
        mask = getattr(cp, _CMP[self.op])(g[self.column], self.value)
        return {n: a[mask] for n, a in g.items()}


@dataclass(frozen=True)
class Project(Operator):
    """Keep ``keep`` and add ``out = col * mul + add`` per derived column."""

    keep: tuple[str, ...]
    derived: tuple[tuple[str, str, float, float], ...] = ()
    name: str = "project"
    kind: str = "project"

    def cpu(self, t: pa.Table) -> pa.Table:
        cols = {n: t.column(n) for n in self.keep}
        for out, col, mul, add in self.derived:
            cols[out] = pc.add(pc.multiply(pc.cast(t.column(col), pa.float64()), mul), add)
        return pa.table(cols)

    def gpu(self, g: GpuTable) -> GpuTable:
        cp = _cp()
        cols = {n: g[n] for n in self.keep}
        for out, col, mul, add in self.derived:
            cols[out] = g[col].astype(cp.float64) * mul + add
        return cols


@dataclass(frozen=True)
class Expand(Operator):
    """A row per sliding window the row's time falls in: ``window_start`` (same unit as ``ts``)."""

    ts: str
    window: int
    slide: int
    name: str = "expand"
    kind: str = "expand"

    def __post_init__(self) -> None:
        if self.slide <= 0 or self.window <= 0 or self.window % self.slide:
            msg = f"expand needs a window that is a positive multiple of the slide, got {self.window} / {self.slide}"
            raise ConfigError(msg)

    def _starts(self, xp, ts):
        k = self.window // self.slide
        last = (ts // self.slide) * self.slide
        return xp.repeat(last, k) - xp.tile(xp.arange(k, dtype=ts.dtype) * self.slide, len(ts)), k

    def cpu(self, t: pa.Table) -> pa.Table:
        starts, k = self._starts(np, t.column(self.ts).to_numpy())
        rows = pa.array(np.repeat(np.arange(t.num_rows), k))
        return t.take(rows).append_column("window_start", pa.array(starts))

    def gpu(self, g: GpuTable) -> GpuTable:
        cp = _cp()
        starts, k = self._starts(cp, g[self.ts])
        out = {n: cp.repeat(a, k) for n, a in g.items()}
        out["window_start"] = starts
        return out


@dataclass(frozen=True)
class Aggregate(Operator):
    """Hash aggregation: per group of ``keys``, ``sum_<value>`` and ``count`` (non-null values, as SQL)."""

    keys: tuple[str, ...]
    value: str
    name: str = "aggregate"
    kind: str = "aggregate"

    def cpu(self, t: pa.Table) -> pa.Table:
        res = t.group_by(list(self.keys), use_threads=False).aggregate([(self.value, "sum"), (self.value, "count")])
        names = {f"{self.value}_sum": f"sum_{self.value}", f"{self.value}_count": "count"}
        res = res.rename_columns([names.get(c, c) for c in res.column_names])
        fields = [(k, t.schema.field(k).type) for k in self.keys]
        schema = pa.schema([*fields, (f"sum_{self.value}", pa.float64()), ("count", pa.int64())])
        return res.select(schema.names).cast(schema)

    def gpu(self, g: GpuTable) -> GpuTable:
        cp = _cp()
        n = len(g[self.value])
        if n == 0:
            empty = {k: g[k][:0] for k in self.keys}
            return {**empty, f"sum_{self.value}": cp.zeros(0), "count": cp.zeros(0, cp.int64)}
        order = cp.lexsort(cp.stack([g[k] for k in reversed(self.keys)]))
        sk = [g[k][order] for k in self.keys]
        new = cp.zeros(n, dtype=bool)
        new[0] = True
        for col in sk:
            new[1:] |= col[1:] != col[:-1]
        gid = cp.cumsum(new) - 1
        first = cp.flatnonzero(new)
        out = {k: col[first] for k, col in zip(self.keys, sk, strict=True)}
        v = g[self.value][order].astype(cp.float64)
        valid = ~cp.isnan(v)  # a null value (NaN on the GPU) is skipped, as SQL's SUM and COUNT(col) do
        count = cp.bincount(gid, weights=valid.astype(cp.float64)).astype(cp.int64)
        total = cp.bincount(gid, weights=cp.where(valid, v, 0.0))
        out[f"sum_{self.value}"] = cp.where(count > 0, total, cp.nan)  # SQL: the SUM of only nulls is null
        out["count"] = count
        return out


@dataclass(frozen=True)
class Join(Operator):
    """Inner hash join with a static table whose ``key`` is unique (a dimension table, as YSB's campaigns)."""

    key: str
    right: pa.Table
    name: str = "join"
    kind: str = "join"

    def __post_init__(self) -> None:
        keys = self.right.column(self.key)
        if keys.null_count or len(pc.unique(keys)) != len(keys):
            msg = f"join: the static table's {self.key!r} must be unique and not null (a dimension table)"
            raise ConfigError(msg)

    def cpu(self, t: pa.Table) -> pa.Table:
        return t.join(self.right, self.key, join_type="inner", use_threads=False)

    def gpu(self, g: GpuTable) -> GpuTable:
        cp = _cp()
        rk = cp.asarray(self.right.column(self.key).to_numpy())
        order = cp.argsort(rk)
        rk_sorted = rk[order]
        pos = cp.clip(cp.searchsorted(rk_sorted, g[self.key]), 0, max(len(rk_sorted) - 1, 0))
        hit = rk_sorted[pos] == g[self.key] if len(rk_sorted) else cp.zeros(len(g[self.key]), bool)
        out = {n: a[hit] for n, a in g.items()}
        idx = order[pos[hit]]
        for n in self.right.column_names:
            if n != self.key:
                out[n] = cp.asarray(self.right.column(n).to_numpy())[idx]
        return out


@dataclass(frozen=True)
class Sort(Operator):
    column: str
    descending: bool = False
    name: str = "sort"
    kind: str = "sort"

    def cpu(self, t: pa.Table) -> pa.Table:
        return t.sort_by([(self.column, "descending" if self.descending else "ascending")])

    def gpu(self, g: GpuTable) -> GpuTable:
        cp = _cp()
        key = g[self.column]
        order = cp.argsort(key, kind="stable") if len(key) else cp.zeros(0, cp.int64)
        if self.descending:  # reversed, not negated: correct for unsigned and minimum values
            order = order[::-1]
        return {n: a[order] for n, a in g.items()}
