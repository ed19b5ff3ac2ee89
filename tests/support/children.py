"""Child processes in tests: a Python child to SIGKILL mid-way (and the acknowledgements it printed
before it died), and whether a process is gone."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path


def spawn(code: str, *args: str) -> subprocess.Popen[str]:
    """``code`` (dedented) run by this interpreter in a child, unbuffered, with ``args`` as argv."""
    return subprocess.Popen(
        [sys.executable, "-u", "-c", textwrap.dedent(code), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )


def kill(child: subprocess.Popen[str]) -> None:
    """SIGKILL the child if it still runs, reap it and close its pipes."""
    if child.poll() is None:
        child.send_signal(signal.SIGKILL)
    child.wait(10)
    child.stdout.close()  # type: ignore[union-attr]
    child.stderr.close()  # type: ignore[union-attr]


def kill_after_acks(code: str, *args: str, acks: int) -> tuple[subprocess.Popen[str], list[int]]:
    """Run ``code``, which prints ``ACK <id>`` after each write it has made durable, and SIGKILL
    it right after the ``acks``-th line; returns the dead child and the ids it acknowledged."""
    child = spawn(code, *args)
    acked: list[int] = []
    try:
        for line in child.stdout:  # type: ignore[union-attr]
            acked.append(int(line.split()[1]))
            if len(acked) == acks:
                child.send_signal(signal.SIGKILL)
                break
    finally:
        kill(child)
    return child, acked


def gone(pid: int) -> bool:
    """The process no longer runs (absent, or a zombie nobody has reaped yet)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] in ("Z", "X")
