"""Elasticity policies: `prompt` (Prompt Sec. 6, Alg. 4 latency-aware auto-scale), `prompt_fast` (ours: Alg. 4 with
a scale-out at the onset of a load rise), `ds2` (a DS2-style rate-based controller, the modern anchor) and `static`.
Resolve by name with :func:`build_elasticity`."""

from __future__ import annotations

from typing import Any

from adaptstream.elasticity.base import BatchStats, ElasticityPolicy, ExecutionPlan
from adaptstream.elasticity.ds2 import DS2Config
from adaptstream.elasticity.prompt import PromptElasticityConfig
from adaptstream.elasticity.prompt_fast import PromptFastConfig
from adaptstream.elasticity.static import StaticConfig
from adaptstream.registry import Registry

ELASTICITY: Registry[Any] = Registry("elasticity policy")
ELASTICITY.register("prompt")(PromptElasticityConfig)
ELASTICITY.register("prompt_fast")(PromptFastConfig)
ELASTICITY.register("static")(StaticConfig)
ELASTICITY.register("ds2")(DS2Config)


def build_elasticity(name: str, **params: Any) -> ElasticityPolicy:
    """Build the named policy (unknown names and parameters list the valid ones)."""
    return ELASTICITY.build(name, params).build()


__all__ = ["ELASTICITY", "BatchStats", "ElasticityPolicy", "ExecutionPlan", "build_elasticity"]
