"""The driver-side controller: one per Spark application, reached by every adaptstream source over local IPC.

``controller.py`` runs a scheduling policy for all queries; ``client.py`` is what a source uses (short timeouts:
an unreachable controller means the query runs unscheduled, with a warning); ``ipc.py`` is the wire format."""

from adaptstream.control.client import ControllerClient
from adaptstream.control.controller import Controller

__all__ = ["Controller", "ControllerClient"]
