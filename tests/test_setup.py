"""scripts/setup.sh, the one step every documented command starts with."""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_a_second_setup_of_one_venv_waits_for_the_first(tmp_path: Path) -> None:
    # Two pips in one venv at once (run.sh and test.sh started side by side) broke it.
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    python = venv / "bin" / "python"
    python.write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
    python.chmod(0o755)
    (venv / ".rlhf-installed-base").touch()  # installed: the setup has nothing to do
    env = {**os.environ, "RLHF_VENV": str(venv)}
    with open(tmp_path / ".venv.setup-lock", "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)  # another setup of this venv is running
        setup = subprocess.Popen(
            ["bash", str(ROOT / "scripts" / "setup.sh")],
            env=env,
            stderr=subprocess.PIPE,
            text=True,
        )
        time.sleep(3)
        assert setup.poll() is None  # it waits
    assert setup.wait(timeout=60) == 0  # and finishes once the first has
    assert "waiting for another setup of" in setup.stderr.read()
