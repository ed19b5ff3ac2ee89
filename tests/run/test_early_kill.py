"""A run killed in its first seconds resumes (issue 32, finding 1).

Checkpoints come every few minutes; a run killed before its first one (a human run spends its
first minutes waiting for labels) used to be unresumable: ``last.pt does not exist``. Now a run
writes a checkpoint before it asks its first label, and a run with labels but no checkpoint (one
killed while it was being built, or written by an older rlhf) goes on from its labels.
"""

from __future__ import annotations

import dataclasses
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from rlhf.config import Config, PPOConfig, QueryConfig
from rlhf.run.runner import run
from rlhf.store import LabelStore
from tests.support.toy_env import ENV_ID

ROOT = Path(__file__).resolve().parents[2]
CHILD = "from tests.support.toy_env import register; register(); from rlhf.cli import main; main()"
STEPS, BATCH, LABELS = 2048, 512, 20


def _cfg(runs: Path) -> Config:
    return Config(
        env_id=ENV_ID, total_timesteps=STEPS, feedback="synthetic", runs_dir=str(runs),
        run_name="early", progress=False, checkpoint_minutes=60.0,  # none but the first
        ppo=PPOConfig(num_steps=BATCH, num_minibatches=8),
        query=QueryConfig(total_labels=LABELS, segment_length=10),
    )  # fmt: skip


def _args(cfg: Config) -> list[str]:
    return [
        "train", "--env-id", cfg.env_id, "--total-timesteps", str(cfg.total_timesteps),
        "--feedback", "synthetic", "--runs-dir", cfg.runs_dir, "--run-name", "early",
        "--no-progress", "--checkpoint-minutes", "60", "--num-steps", str(BATCH),
        "--num-minibatches", "8", "--query.total-labels", str(LABELS),
        "--query.segment-length", "10",
    ]  # fmt: skip


def _labels(root: Path) -> dict[int, str]:
    path = root / "labels.sqlite"
    if not path.exists():
        return {}
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5)
    try:
        return dict(con.execute("SELECT pair_id, answer FROM labels").fetchall())
    except sqlite3.OperationalError:  # the schema is not there yet
        return {}
    finally:
        con.close()


def _kill_when(cfg: Config, ready: Callable[[Path], bool]) -> dict[int, str]:
    """Start the run on the command line, SIGKILL it once ``ready(root)``; its labels then."""
    root = Path(cfg.runs_dir) / "early"
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, *_args(cfg)], cwd=ROOT, stderr=subprocess.PIPE, text=True
    )
    try:
        deadline = time.monotonic() + 90
        while not ready(root):
            if child.poll() is not None or time.monotonic() > deadline:
                _, err = child.communicate()
                pytest.fail(f"the moment never came (exit {child.returncode}): {err[-2000:]}")
            time.sleep(0.01)
        child.send_signal(signal.SIGKILL)  # no handler, no cleanup: a crash
        child.wait(10)
    finally:
        child.kill()
        child.communicate()
    assert not (root / "summary.json").exists()
    return _labels(root)


MOMENTS: dict[str, Callable[[Path], bool]] = {
    # The run directory exists: the parts may still be being built, no checkpoint may exist.
    "run-dir": lambda root: (root / "config.json").exists(),
    # Labels are stored; the only checkpoint is the one written before the first was asked.
    "labels": lambda root: len(_labels(root)) >= 5,
}


@pytest.mark.parametrize("moment", [*MOMENTS, "labels-no-checkpoint"])
def test_a_run_killed_in_its_first_seconds_resumes_with_its_labels(
    tmp_path: Path, moment: str
) -> None:
    cfg = _cfg(tmp_path)
    root = tmp_path / "early"
    before = _kill_when(cfg, MOMENTS[moment.removesuffix("-no-checkpoint")])
    if moment == "labels-no-checkpoint":  # killed before it, or by an rlhf that wrote none
        (root / "checkpoints" / "last.pt").unlink()
    summary = run(dataclasses.replace(cfg, resume=str(root)))
    assert summary.status == "finished" and summary.env_steps == STEPS
    after = _labels(root)
    assert before.items() <= after.items()  # every label kept, none changed
    counts = LabelStore(root / "labels.sqlite").counts()
    assert counts.pairs == counts.labelled == LABELS  # the budget exactly: none asked twice
    if moment != "run-dir":
        assert before, "the kill came before any label: the moment was not reached"
