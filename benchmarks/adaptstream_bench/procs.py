"""The processes of one process group, read from /proc (the chaos and soak benchmarks start their drivers in a
session of their own, so the group holds the driver, its JVM and every Python process Spark starts)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path


def group_processes(pgid: int) -> Iterator[tuple[int, bytes]]:
    """(PID, command line with spaces) of every live process of the group; one that ends while read is skipped."""
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            if os.getpgid(int(d.name)) != pgid:
                continue
            cmd = (d / "cmdline").read_bytes().replace(b"\0", b" ")
        except (OSError, ProcessLookupError):
            continue
        yield int(d.name), cmd
