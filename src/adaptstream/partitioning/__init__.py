"""Block partitioning of micro-batches: which rows go to which Spark input partition (task).

Implements the partitioners of Prompt (Abdelhamid et al., Sec. 2.2 and 4) and of holistic stream
partitioning (Katsipoulakis et al., Sec. 2.4 and 4). Names: time, shuffle, hash, pk2, pk5, cm, am, cam, lm,
prompt, auto, and HyperLogLog variants cm-hll, am-hll, cam-hll, lm-hll (or `cardinality="hll"`).
"""

from __future__ import annotations

from typing import Any

from adaptstream.partitioning.am import AMConfig
from adaptstream.partitioning.auto import AutoConfig
from adaptstream.partitioning.base import Partitioner, key_hash
from adaptstream.partitioning.cam import CAMConfig
from adaptstream.partitioning.cm import CMConfig
from adaptstream.partitioning.hash import HashConfig
from adaptstream.partitioning.lm import LMConfig
from adaptstream.partitioning.pk import PKConfig
from adaptstream.partitioning.prompt import PromptConfig
from adaptstream.partitioning.shuffle import ShuffleConfig
from adaptstream.partitioning.time import TimeConfig
from adaptstream.registry import Registry

PARTITIONERS: Registry[Any] = Registry("partitioner")

# name -> (config class, defaults the name implies)
_PRESETS: dict[str, tuple[type, dict[str, Any]]] = {
    "time": (TimeConfig, {}),
    "shuffle": (ShuffleConfig, {}),
    "hash": (HashConfig, {}),
    "pk2": (PKConfig, {"choices": 2}),
    "pk5": (PKConfig, {"choices": 5}),
    "cm": (CMConfig, {}),
    "am": (AMConfig, {}),
    "cam": (CAMConfig, {}),
    "lm": (LMConfig, {}),
    "cm-hll": (CMConfig, {"cardinality": "hll"}),
    "am-hll": (AMConfig, {"cardinality": "hll"}),
    "cam-hll": (CAMConfig, {"cardinality": "hll"}),
    "lm-hll": (LMConfig, {"cardinality": "hll"}),
    "prompt": (PromptConfig, {}),
    "auto": (AutoConfig, {}),
}
for _name, (_cls, _defaults) in _PRESETS.items():
    PARTITIONERS.register(_name, **_defaults)(_cls)

#: the partitioners the issue names, in the order reports list them
MAIN_NAMES = ["time", "shuffle", "hash", "pk2", "pk5", "cm", "am", "cam", "lm", "prompt", "auto"]


def make_config(name: str, **params: Any) -> Any:
    """Frozen config for a registered name with its implied defaults, overridden by ``params`` (option strings
    such as ``partitionerParams`` "choices=5;cardinality=hll" are coerced to each field's type)."""
    return PARTITIONERS.build(name, params)


def build_partitioner(name: str, **params: Any) -> Partitioner:
    """Resolve a registered name (unknown names list the valid choices) and build a fresh partitioner."""
    return make_config(name, **params).build()


__all__ = ["MAIN_NAMES", "PARTITIONERS", "Partitioner", "build_partitioner", "key_hash", "make_config"]
