"""One root exception; each package raises its own subclass so callers can catch narrowly."""

from __future__ import annotations


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
