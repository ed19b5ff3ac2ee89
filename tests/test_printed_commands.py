"""Every command line the app prints for a person runs as printed, in a shell set up as the Quick
start leaves it: ``scripts/run.sh`` installs into ``.venv`` and does not put ``.venv/bin`` on the
PATH, so a bare ``rlhf ...`` or ``tensorboard ...`` would answer "command not found".

Each test takes a printed line from where a person reads it (the finished page's status, the line
an interrupted run ends with, the hint for a missing extra) and runs it with ``bash -c`` from the
directory it was printed in, with a PATH that has no venv on it."""

from __future__ import annotations

import builtins
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from rlhf.config import Config, PPOConfig, QueryConfig
from rlhf.core.shell import program
from rlhf.feedback.session import watch_command
from rlhf.run.runner import run
from rlhf.server import create_app
from rlhf.store import LabelStore
from tests.support.helpers import tb_scalars

BARE_PATH = "/usr/local/bin:/usr/bin:/bin"
"""A login shell's PATH: the system's programs, not the venv's."""
VENV_BIN = Path(sys.executable).parent


def _shell(command: str, cwd: Path, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PATH": BARE_PATH, "MUJOCO_GL": os.environ.get("MUJOCO_GL", "egl")}
    env.pop("VIRTUAL_ENV", None)
    return subprocess.run(
        ["bash", "-c", command], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout
    )


@pytest.fixture
def shell_like_run_sh(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """This process sees the PATH and working directory of a person after scripts/run.sh."""
    monkeypatch.setenv("PATH", BARE_PATH)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _pendulum(name: str, steps: int = 1024, **kw) -> Config:
    return Config(
        env_id="Pendulum-v1",
        total_timesteps=steps,
        seed=1,
        feedback="synthetic",
        runs_dir="runs",
        run_name=name,
        progress=False,
        ppo=PPOConfig(num_steps=512, num_minibatches=4, update_epochs=1),
        query=QueryConfig(total_labels=8, segment_length=25),
        **kw,
    )


def test_the_program_is_named_by_the_path_that_runs_when_the_venv_is_not_on_path(
    shell_like_run_sh: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert shutil.which("rlhf") is None  # the situation this guards against
    assert program("rlhf") == os.fspath(VENV_BIN / "rlhf")  # outside the checkout: absolute
    monkeypatch.setenv("PATH", f"{VENV_BIN}:{BARE_PATH}")  # an activated venv
    assert program("rlhf") == "rlhf"


def test_the_finished_pages_commands_run_as_printed(shell_like_run_sh: Path) -> None:
    cwd = shell_like_run_sh
    run(_pendulum("done"))
    app = create_app(
        LabelStore(cwd / "runs" / "done" / "labels.sqlite"),
        cwd / "runs" / "done" / "videos",
        watch_command=watch_command(Path("runs")),  # what `rlhf serve` and the trainer pass
    )
    status = app.test_client().get("/api/status").get_json()
    resume, watch = status["resume_command"], status["watch_command"]
    assert resume.endswith("--total-timesteps 2048"), resume

    result = _shell(resume, cwd)  # trains the run on to twice its budget
    assert result.returncode == 0, (resume, result.stderr[-2000:])
    summary = json.loads((cwd / "runs" / "done" / "summary.json").read_text())
    assert summary["env_steps"] == 2048 and summary["sessions"] == 2

    # TensorBoard serves until stopped: it runs once it says where. --port 0 (any free port) is
    # added only so that a TensorBoard already on the default port cannot fail the test.
    board = subprocess.Popen(
        ["bash", "-c", f"exec {watch} --port 0"],
        cwd=cwd,
        env={**os.environ, "PATH": BARE_PATH},
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
    )
    watchdog = threading.Timer(90, board.kill)  # a TensorBoard that never says where
    watchdog.start()
    said = ""
    try:
        assert board.stderr is not None
        for line in board.stderr:
            said += line
            if re.search(r"TensorBoard \S+ at http://", line):
                break
        assert re.search(r"TensorBoard \S+ at http://", said), (watch, said)
    finally:
        watchdog.cancel()
        board.kill()
        board.wait()


def test_the_finished_pages_command_after_max_minutes_runs_as_printed(
    shell_like_run_sh: Path,
) -> None:
    cwd = shell_like_run_sh
    first = run(_pendulum("timed", steps=8192, max_minutes=1e-4))  # ends on the clock
    assert first.env_steps < 8192
    app = create_app(LabelStore(cwd / "runs" / "timed" / "labels.sqlite"), cwd / "runs" / "timed")
    resume = app.test_client().get("/api/status").get_json()["resume_command"]
    assert resume.endswith("--max-minutes 0.0002"), resume  # more time, not more steps

    result = _shell(resume, cwd)
    assert result.returncode == 0, (resume, result.stderr[-2000:])
    summary = json.loads((cwd / "runs" / "timed" / "summary.json").read_text())
    assert summary["status"] == "finished" and summary["sessions"] == 2


def test_the_interrupt_line_runs_as_printed(tmp_path: Path) -> None:
    """A run stopped with Ctrl-C ends with "continue with: COMMAND"; COMMAND resumes it."""
    args = ["train", "--env-id", "Pendulum-v1", "--feedback", "synthetic", "--run-name", "cut"]
    args += ["--total-timesteps", "20480", "--query.total-labels", "8", "--no-progress"]
    env = {**os.environ, "PATH": BARE_PATH}
    trainer = subprocess.Popen(
        [os.fspath(VENV_BIN / "rlhf"), *args],
        cwd=tmp_path,
        env=env,
        stderr=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    tb = tmp_path / "runs" / "cut" / "tb"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and trainer.poll() is None:  # into the second iteration
        if tb.exists() and len(tb_scalars(tb, "charts/sps")) >= 1:
            break
        time.sleep(0.5)
    trainer.send_signal(signal.SIGINT)
    _, err = trainer.communicate(timeout=120)
    found = re.search(r"continue with: (.+)$", err, re.MULTILINE)
    assert found is not None, err[-2000:]
    resume = found.group(1)
    assert resume.startswith(os.fspath(VENV_BIN / "rlhf")), resume

    result = _shell(resume, tmp_path)
    assert result.returncode == 0, (resume, result.stderr[-2000:])
    summary = json.loads((tmp_path / "runs" / "cut" / "summary.json").read_text())
    assert summary["status"] == "finished" and summary["sessions"] == 2


def test_a_missing_extras_hint_runs_as_printed(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Without pyarrow, ``rlhf export`` names the command that installs the ``data`` extra."""
    from rlhf.cli import main

    real_import = builtins.__import__

    def no_pyarrow(name: str, *args, **kwargs):
        if name.split(".")[0] == "pyarrow":
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    root = Path(__file__).resolve().parents[1]
    monkeypatch.setenv("PATH", BARE_PATH)
    monkeypatch.chdir(root)  # where a person who cloned the project stands
    monkeypatch.setattr(builtins, "__import__", no_pyarrow)
    with pytest.raises(SystemExit) as exit_info:
        main(["export", "runs/none", "/tmp/never-written"])
    monkeypatch.setattr(builtins, "__import__", real_import)
    assert exit_info.value.code == 2
    line = capsys.readouterr().err.strip().splitlines()[-1]
    hint = line.rsplit(": ", 1)[1]
    assert hint == "scripts/setup.sh data", line

    script = VENV_BIN / "rlhf"
    before = script.stat().st_mtime_ns
    result = _shell(hint, root, timeout=300)  # installs the extra from the lock (here: already in)
    assert result.returncode == 0, result.stderr[-2000:]
    # rlhf itself is not reinstalled: that rewrites its console script under every test that
    # starts it meanwhile (one found no `rlhf` beside its Python and printed the bare name).
    assert script.stat().st_mtime_ns == before
    assert _shell(f"{VENV_BIN / 'python'} -c 'import pyarrow, minari'", root).returncode == 0
