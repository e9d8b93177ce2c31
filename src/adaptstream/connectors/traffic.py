"""Input traffic patterns: rows per one-second dataset.

constant   N rows every second (LMStream Sec. V-A "Constant Traffic")
random     rows ~ Normal(mean N, sd = jitter*N), clipped at 0 (LMStream Sec. V-A "Random Traffic"; the paper
           gives no deviation, we default to 0.25*N)
sinusoidal N * (1 + amplitude*sin(2*pi*t/period)) (Prompt Sec. 7's variable input rate)
step       a square wave with the same mean and swing: N * (1 - amplitude) in the first half of every period,
           N * (1 + amplitude) in the second (a step up at period/2, a step down at period); amplitude 0.6 is a
           4x swing, as sinusoidal's
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import numpy as np

from adaptstream.errors import ConfigError
from adaptstream.registry import Registry

TRAFFIC: Registry[type] = Registry("traffic pattern")


@TRAFFIC.register("constant")
@dataclass(frozen=True)
class ConstantTraffic:
    rate: int = 1000

    def rows_at(self, second: int) -> int:
        return int(self.rate)


@TRAFFIC.register("random")
@dataclass(frozen=True)
class RandomTraffic:
    rate: int = 1000
    jitter: float = 0.25
    seed: int = 0

    def rows_at(self, second: int) -> int:
        # One generator per second keeps the pattern replayable from any second.
        rng = np.random.default_rng([self.seed, second])
        return max(0, round(rng.normal(self.rate, self.jitter * self.rate)))


@TRAFFIC.register("sinusoidal")
@dataclass(frozen=True)
class SinusoidalTraffic:
    rate: int = 1000
    amplitude: float = 0.5
    period: float = 60.0

    def rows_at(self, second: int) -> int:
        return max(0, round(self.rate * (1 + self.amplitude * math.sin(2 * math.pi * second / self.period))))


@TRAFFIC.register("step")
@dataclass(frozen=True)
class StepTraffic:
    """Why a square wave: an elasticity policy must follow a sudden 4x rise and fall (Prompt Fig. 12's step),
    and sharing ``amplitude`` / ``period`` with ``sinusoidal`` keeps both patterns' mean and peak equal."""

    rate: int = 1000
    amplitude: float = 0.5
    period: float = 60.0

    def rows_at(self, second: int) -> int:
        high = (second % self.period) >= self.period / 2
        return max(0, round(self.rate * (1 + self.amplitude if high else 1 - self.amplitude)))


Traffic = ConstantTraffic | RandomTraffic | SinusoidalTraffic | StepTraffic


def build_traffic(name: str, rate: int, seed: int = 0, **params: float) -> Traffic:
    if rate < 0:
        msg = f"rate must be >= 0 rows per second, got {rate}"
        raise ConfigError(msg)
    cls = TRAFFIC.get(name)
    kwargs: dict = {"rate": int(rate)}
    if cls is RandomTraffic:
        kwargs["seed"] = seed
    fields = {f.name for f in dataclasses.fields(cls)}
    kwargs.update({k: v for k, v in params.items() if k in fields})
    return cls(**kwargs)
