"""Device mapping (LMStream Alg. 2): `mapdevice` (Eq. 7-10), and the baselines `cpu` and `gpu` (every operator
on one device). Resolve by name with :func:`build_device_mapper`; operator backends are in
:mod:`adaptstream.devices.operators`."""

from __future__ import annotations

from typing import Any

from adaptstream.devices.base import CPU, GPU, TABLE_II, DeviceMapper, DeviceOutcome, OpNode, transitions
from adaptstream.devices.mapdevice import MapDeviceConfig
from adaptstream.devices.static import AllCpuConfig, AllGpuConfig
from adaptstream.registry import Registry

DEVICE_MAPPERS: Registry[Any] = Registry("device mapper")
DEVICE_MAPPERS.register("mapdevice")(MapDeviceConfig)
DEVICE_MAPPERS.register("cpu")(AllCpuConfig)
DEVICE_MAPPERS.register("gpu")(AllGpuConfig)


def build_device_mapper(name: str, **params: Any) -> DeviceMapper:
    """Build the named mapper (unknown names and parameters list the valid ones)."""
    return DEVICE_MAPPERS.build(name, params).build()


__all__ = [
    "CPU",
    "DEVICE_MAPPERS",
    "GPU",
    "TABLE_II",
    "DeviceMapper",
    "DeviceOutcome",
    "OpNode",
    "build_device_mapper",
    "transitions",
]
