"""A benchmark script stopped with SIGTERM, or one whose job fails, ends on one line, not on a
traceback."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tests.support.workers import RAY

pytest.importorskip("ray")

pytestmark = RAY

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = """
import sys, time
from pathlib import Path
from rlhf.sweep import run_jobs

def job(marker):
    Path(marker).touch()
    for _ in range(1200):  # Ray cancels between bytecodes: not inside one long sleep
        time.sleep(0.1)

run_jobs(job, [sys.argv[1]], num_cpus=1, after_stop="the runs kept are in OUT")
print("not reached")
"""


def test_a_stopped_script_says_so_in_one_line_and_exits_130(tmp_path: Path) -> None:
    marker = tmp_path / "started"
    child = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(SCRIPT), str(marker)],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        # A suite started in the background inherits SIGINT ignored, and so would Ray's workers:
        # give them the SIGINT that cancels a running job.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )  # fmt: skip
    deadline = time.monotonic() + 120
    while not marker.exists():
        if child.poll() is not None or time.monotonic() > deadline:
            child.kill()
            pytest.fail(f"the job never started: {child.communicate()[1][-2000:]}")
        time.sleep(0.05)
    child.send_signal(signal.SIGTERM)
    out, err = child.communicate(timeout=200)
    assert child.returncode == 130, err[-2000:]
    assert "not reached" not in out
    assert err.strip().splitlines()[-1] == "stopped; the runs kept are in OUT", err[-2000:]
    assert "Traceback" not in err, err[-2000:]


FAILING = """
import sys
from rlhf.sweep import run_jobs

def job(n):
    if n == 2:
        raise ValueError("no such env")
    return n

run_jobs(job, [1, 2], num_cpus=1, after_stop="the runs kept are in OUT")
print("not reached")
"""


def test_a_failed_job_ends_the_script_in_one_line_with_exit_1(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(FAILING)],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 1, done.stderr[-2000:]
    assert "not reached" not in done.stdout
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("1 of 2 jobs failed; the first: ValueError: no such env"), last
    assert last.endswith("; the runs kept are in OUT"), last
    assert "Traceback" not in done.stderr, done.stderr[-2000:]
