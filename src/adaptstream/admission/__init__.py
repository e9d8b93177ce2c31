"""Admission policies: when to cut a micro-batch. Resolve by name with :func:`build_admission`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from adaptstream.admission.asap import AsapConfig, AsapPolicy
from adaptstream.admission.base import AdmissionPolicy, BatchOutcome, PendingDataset
from adaptstream.admission.fixed import FixedConfig, FixedPolicy
from adaptstream.admission.lmstream import LMStreamConfig, LMStreamPolicy
from adaptstream.registry import Registry

ADMISSION: Registry[type] = Registry("admission policy")
ADMISSION.register("asap")(AsapConfig)
ADMISSION.register("fixed")(FixedConfig)
ADMISSION.register("lmstream")(LMStreamConfig)


def build_admission(name: str, params: Mapping[str, Any] | str | None = None, **shared: Any) -> AdmissionPolicy:
    """Build the named policy. ``params`` (``admissionParams``: a mapping or ``'history=8;margin_z=2'``) must be
    fields of its config (an unknown one names the valid fields); ``shared`` settings every source passes (slide,
    trigger, margin, poll_interval) are taken by the policies that have them."""
    return ADMISSION.build(name, params, **shared).build()


__all__ = [
    "ADMISSION",
    "AdmissionPolicy",
    "AsapConfig",
    "AsapPolicy",
    "BatchOutcome",
    "FixedConfig",
    "FixedPolicy",
    "LMStreamConfig",
    "LMStreamPolicy",
    "PendingDataset",
    "build_admission",
]
