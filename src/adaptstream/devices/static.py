"""The baselines of MapDevice's benchmark: every operator on one device (LMStream's all-CPU and all-GPU)."""

from __future__ import annotations

from dataclasses import dataclass

from adaptstream.devices.base import CPU, DEVICES, DeviceMapper, OpNode
from adaptstream.errors import ConfigError


class OneDevice(DeviceMapper):
    def __init__(self, device: str) -> None:
        if device not in DEVICES:
            msg = f"unknown device {device!r}; valid choices: {', '.join(DEVICES)}"
            raise ConfigError(msg)
        self.device = device
        self.name = device  # the registry name, as every snapshot records it

    def map(self, plan: list[OpNode], partition_bytes: float) -> list[str]:
        return [self.device] * len(plan)


@dataclass(frozen=True)
class AllCpuConfig:
    def build(self) -> DeviceMapper:
        return OneDevice(CPU)


@dataclass(frozen=True)
class AllGpuConfig:
    def build(self) -> DeviceMapper:
        return OneDevice("gpu")
