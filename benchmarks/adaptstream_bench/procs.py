"""The processes of one session, read from /proc.

The chaos, soak and backlog benchmarks start each driver in a session of its own (``start_new_session``). A process
group is not enough: PySpark's ``pyspark.daemon`` calls ``setpgid(0, 0)`` as it starts, so the executors' Python
workers and the Python data source's planning workers each lead a group of their own; the session holds them all.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from pathlib import Path


def session_of(pid: int) -> int:
    """The session id of a process (field 6 of /proc/PID/stat, after the command name in parentheses)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[3])


def session_processes(sid: int) -> Iterator[tuple[int, bytes]]:
    """(PID, command line with spaces) of every live process of session ``sid``; one that ends while read is
    skipped."""
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            if session_of(int(d.name)) != sid:
                continue
            cmd = (d / "cmdline").read_bytes().replace(b"\0", b" ")
        except (OSError, ValueError, IndexError):
            continue
        yield int(d.name), cmd


def kill_session(sid: int) -> int:
    """SIGKILL every process of the session (the driver, its JVM and every Python process Spark started), again
    while one started in between is left; returns how many were signalled."""
    signalled: set[int] = set()
    for _ in range(5):
        pids = [pid for pid, _ in session_processes(sid) if pid not in signalled]  # a killed one may stay a zombie
        if not pids:
            break
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
                signalled.add(pid)
            except ProcessLookupError:
                pass
    return len(signalled)
