"""Multi-query schedulers: which query may cut its next micro-batch now. Resolve by name with
:func:`build_scheduler`; the driver-side controller (control/) runs the policy for a whole Spark application."""

from __future__ import annotations

from typing import Any

from adaptstream.registry import Registry
from adaptstream.scheduling.base import QueryState, SchedulerConfig, SchedulerPolicy
from adaptstream.scheduling.default import DefaultConfig
from adaptstream.scheduling.fair import FairConfig
from adaptstream.scheduling.fcfs import FcfsConfig
from adaptstream.scheduling.hr import HighestRateConfig
from adaptstream.scheduling.klink import KlinkConfig, KlinkPolicy
from adaptstream.scheduling.rr import RoundRobinConfig
from adaptstream.scheduling.sbox import SBoxConfig
from adaptstream.scheduling.swm import SwmEstimator

SCHEDULERS: Registry[type] = Registry("scheduler")
SCHEDULERS.register("default")(DefaultConfig)
SCHEDULERS.register("fair")(FairConfig)
SCHEDULERS.register("rr")(RoundRobinConfig)
SCHEDULERS.register("fcfs")(FcfsConfig)
SCHEDULERS.register("hr")(HighestRateConfig)
SCHEDULERS.register("sbox")(SBoxConfig)
SCHEDULERS.register("klink")(KlinkConfig)


def build_scheduler(name: str, **params: Any) -> SchedulerPolicy:
    """Build the named scheduler; an unknown parameter is an error naming the valid ones, and option strings
    ("inf", "2") are coerced to the field's type."""
    return SCHEDULERS.build(name, params).build()


__all__ = [
    "SCHEDULERS",
    "KlinkConfig",
    "KlinkPolicy",
    "QueryState",
    "SchedulerConfig",
    "SchedulerPolicy",
    "SwmEstimator",
    "build_scheduler",
]
