"""Name -> factory registries; unknown names list the valid choices (as PyTorch Geometric's resolvers do).

Plugins: a name of the form ``package.module:Name`` imports that module and takes its attribute (so a policy or
connector of the user's own package works from a Spark option, in every Python worker that reads the option, with
no registration call); an installed package may also list modules under the entry-point group
``adaptstream.plugins``, imported the first time a name is not found, whose import registers their entries.
"""

from __future__ import annotations

import dataclasses
import importlib
import logging
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Generic, TypeVar

from adaptstream.errors import ConfigError, UnknownNameError

log = logging.getLogger(__name__)
PLUGIN_GROUP = "adaptstream.plugins"
_plugins_loaded = [False]


def load_plugins() -> None:
    """Import every module listed under the ``adaptstream.plugins`` entry points, once per process."""
    if _plugins_loaded[0]:
        return
    _plugins_loaded[0] = True
    from importlib.metadata import entry_points

    for ep in entry_points(group=PLUGIN_GROUP):
        try:
            ep.load()
        except Exception as e:  # a broken plugin must not break the core
            log.warning("adaptstream plugin %s (%s) failed to load: %s", ep.name, ep.value, e)


def import_object(spec: str, family: str) -> Any:
    """``package.module:Name`` -> that object, or an UnknownNameError that says what failed."""
    module, _, attr = spec.partition(":")
    try:
        return getattr(importlib.import_module(module.strip()), attr.strip())
    except (ImportError, AttributeError, ValueError) as e:
        msg = f"cannot load {family} {spec!r}: {e}"
        raise UnknownNameError(msg) from None


T = TypeVar("T")


class Registry(Generic[T]):
    """A small case-insensitive registry of named factories of one family."""

    def __init__(self, family: str) -> None:
        self.family = family
        self._items: dict[str, T] = {}
        self._display: dict[str, str] = {}  # lower-case key -> the name as registered
        self._defaults: dict[str, dict[str, Any]] = {}  # lower-case key -> parameters the name implies

    def register(self, name: str, **defaults: Any) -> Callable[[T], T]:
        """Register under ``name``; ``defaults`` are parameters the name implies (``pk5``: PK with choices=5)."""

        def deco(obj: T) -> T:
            key = name.lower()
            if key in self._items:
                msg = f"{self.family} {name!r} is registered twice"
                raise ValueError(msg)
            self._items[key] = obj
            self._display[key] = name
            self._defaults[key] = defaults
            return obj

        return deco

    def get(self, name: str) -> T:
        if ":" in str(name):
            return import_object(str(name), self.family)
        key = str(name).strip().lower()
        if key not in self._items:
            load_plugins()
        if key not in self._items:
            choices = ", ".join(self.names())
            msg = f"unknown {self.family} {name!r}; valid choices: {choices}"
            raise UnknownNameError(msg)
        return self._items[key]

    def build(self, name: str, params: Mapping[str, Any] | str | None = None, **shared: Any) -> Any:
        """The frozen config of ``name``: ``params`` (a mapping, or ``'name=value;name=value'``) must be fields of
        it (an unknown one is an error naming the valid fields), ``shared`` settings are taken where the config has
        such a field and ignored otherwise; option strings are coerced to each field's type."""
        from adaptstream.config import coerce_param, parse_kv

        cls: Any = self.get(name)
        given = parse_kv(params, f"{self.family} parameters") if isinstance(params, str) else dict(params or {})
        given = {**self._defaults.get(str(name).strip().lower(), {}), **given}
        fields = {f.name: f for f in dataclasses.fields(cls)}
        unknown = sorted(set(given) - set(fields))
        if unknown:
            msg = f"{self.family} {name!r} has no parameter(s) {unknown}; valid: {sorted(fields)}"
            raise ConfigError(msg)
        values = {k: v for k, v in shared.items() if k in fields}
        for key, value in given.items():
            values[key] = coerce_param(f"{self.family} {name!r} parameter {key}", value, fields[key].default)
        return cls(**values)

    def names(self) -> list[str]:
        return sorted(self._display.values())

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name.lower() in self._items

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())
