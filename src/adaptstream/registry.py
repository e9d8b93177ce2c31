"""Name -> factory registries; unknown names list the valid choices (as PyTorch Geometric's resolvers do)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Generic, TypeVar

from adaptstream.errors import UnknownNameError

T = TypeVar("T")


class Registry(Generic[T]):
    """A small case-insensitive registry of named factories of one family."""

    def __init__(self, family: str) -> None:
        self.family = family
        self._items: dict[str, T] = {}
        self._display: dict[str, str] = {}  # lower-case key -> the name as registered

    def register(self, name: str) -> Callable[[T], T]:
        def deco(obj: T) -> T:
            key = name.lower()
            if key in self._items:
                msg = f"{self.family} {name!r} is registered twice"
                raise ValueError(msg)
            self._items[key] = obj
            self._display[key] = name
            return obj

        return deco

    def get(self, name: str) -> T:
        key = str(name).strip().lower()
        if key not in self._items:
            choices = ", ".join(self.names())
            msg = f"unknown {self.family} {name!r}; valid choices: {choices}"
            raise UnknownNameError(msg)
        return self._items[key]

    def names(self) -> list[str]:
        return sorted(self._display.values())

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name.lower() in self._items

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())
