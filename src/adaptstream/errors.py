"""One root exception; each package raises its own subclass so callers can catch narrowly."""

from __future__ import annotations

import re


class AdaptstreamError(Exception):
    """Root of every error adaptstream raises on purpose (the CLI prints these without a traceback)."""


class ConfigError(AdaptstreamError, ValueError):
    """An option or argument has a bad value."""


class UnknownNameError(ConfigError, KeyError):
    """A policy, connector or workload name that is not registered."""

    def __str__(self) -> str:  # KeyError quotes its message; we want it plain
        return str(self.args[0]) if self.args else ""


class EnvironmentProblem(AdaptstreamError):
    """The machine lacks something adaptstream needs (Java, a service)."""


class ConnectorError(AdaptstreamError):
    """A connector could not read or write its datasets."""


class StateFileError(AdaptstreamError):
    """A state file that decides which data is read or emitted is damaged: the query stops rather than guess."""


class AdmissionError(AdaptstreamError):
    """An admission policy was used wrongly."""


class PartitioningError(AdaptstreamError):
    """A partitioner was used wrongly."""


class WorkloadError(AdaptstreamError):
    """A workload could not be built."""


class CostModelError(AdaptstreamError):
    """The cost model or placement optimizer failed."""


def _error_classes() -> dict[str, type[AdaptstreamError]]:
    found: dict[str, type[AdaptstreamError]] = {}
    todo: list[type[AdaptstreamError]] = [AdaptstreamError]
    while todo:
        cls = todo.pop()
        found[cls.__name__] = cls
        todo.extend(cls.__subclasses__())
    return found


_PY_EXC_LINE = re.compile(r"^\s*([A-Za-z_][\w.]*(?:Error|Exception|Problem)): (.+)$", re.MULTILINE)


def query_error(text: str) -> AdaptstreamError:
    """The one line that says why a streaming query failed, as an adaptstream error of the original class.

    A failure inside our source reaches the driver as a Java exception whose text embeds the Python traceback
    (56-141 lines); its last exception line names one of our classes (``adaptstream.errors.ConfigError: ...``).
    Failures that are not ours keep the last Python exception line, else the first line of the text.
    """
    classes = _error_classes()
    ours = None
    for m in _PY_EXC_LINE.finditer(text):
        name, msg = m.group(1).rsplit(".", 1)[-1], m.group(2).strip()
        if name in classes:
            ours = (classes[name], msg)
    if ours is not None:
        return ours[0](ours[1])
    other = None
    if "Traceback (most recent call last):" in text:  # the first unindented line after the last Python traceback
        tail = text.rsplit("Traceback (most recent call last):", 1)[1].splitlines()
        other = next((ln.strip() for ln in tail if ln.strip() and not ln[0].isspace()), None)
        if other:
            name, sep, msg = other.partition(": ")
            other = f"{name.rsplit('.', 1)[-1]}{sep}{msg}"
    first = next((ln.strip() for ln in text.splitlines() if ln.strip()), "no message")
    return AdaptstreamError(f"the streaming query failed: {other or first}")
