"""The ``adaptstream`` command line: run, demo, bench, and the policy families' own sub-commands.

One module per command group: ``root`` (the app, error contract, add-ons), ``options`` (shared option types), ``run``
(``run`` and several queries at once: ``multi``), ``commands`` (produce, demo, submit, options).

Error contract (tested in tests/unit/test_cli.py): a usage error (unknown option, command or choice, a value out
of range) prints click's usage message and exits 2; any other failure prints one ``error:`` line and exits 1 (a bad
option value found by our own checks exits 2 as well); ``--debug`` or ``ADAPTSTREAM_DEBUG=1`` adds the full
traceback. Everything that can be checked without Spark is checked before Spark starts.
"""

from __future__ import annotations

from adaptstream.cli import commands, run  # noqa: F401  (each registers its commands on the app, in this order)
from adaptstream.cli.root import DEBUG_ENV, app, debug_enabled, main, register_subapps
from adaptstream.cli.run import _progress_info

register_subapps()

__all__ = ["DEBUG_ENV", "_progress_info", "app", "debug_enabled", "main"]
