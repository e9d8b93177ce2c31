"""Reduce-bucket allocators (Prompt Sec. 5): `hash` (Spark's shuffle), `prompt` (Alg. 3 worst-fit) and `split`
(hot keys of decomposable aggregates split over several buckets, the rest longest-first).
Resolve by name with :func:`build_allocator`."""

from __future__ import annotations

from typing import Any

from adaptstream.allocation.base import ReduceAllocator, hash_bucket
from adaptstream.allocation.hash import HashAllocatorConfig
from adaptstream.allocation.prompt import PromptAllocatorConfig, worst_fit_buckets
from adaptstream.allocation.split import SplitAllocatorConfig
from adaptstream.registry import Registry

ALLOCATORS: Registry[Any] = Registry("reduce allocator")
ALLOCATORS.register("hash")(HashAllocatorConfig)
ALLOCATORS.register("prompt")(PromptAllocatorConfig)
ALLOCATORS.register("split")(SplitAllocatorConfig)


def build_allocator(name: str, **params: Any) -> ReduceAllocator:
    """Build the named allocator (unknown names and parameters list the valid ones)."""
    return ALLOCATORS.build(name, params).build()


__all__ = ["ALLOCATORS", "ReduceAllocator", "build_allocator", "hash_bucket", "worst_fit_buckets"]
