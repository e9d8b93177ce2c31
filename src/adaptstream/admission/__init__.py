"""Admission policies: when to cut a micro-batch. Resolve by name with :func:`build_admission`."""

from __future__ import annotations

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


def build_admission(name: str, **params: Any) -> AdmissionPolicy:
    """Build the named policy; parameters a policy does not take are ignored (options are shared)."""
    import dataclasses

    config_cls = ADMISSION.get(name)
    fields = {f.name for f in dataclasses.fields(config_cls)}
    return config_cls(**{k: v for k, v in params.items() if k in fields}).build()


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
