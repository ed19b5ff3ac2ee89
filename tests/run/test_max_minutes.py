"""--max-minutes: a run ends on the clock as it ends when its steps are spent, and trains on when
a resume gives it more time (or none: no limit)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from rlhf.cli import main
from rlhf.config import Config, PPOConfig, QueryConfig, SACConfig
from rlhf.run.runner import run
from tests.support.helpers import QUICK_REWARD_FIT
from tests.support.toy_env import ENV_ID

STEPS, BATCH = 4096, 512
MOMENT = 1e-4
"""Six milliseconds: spent before a toy iteration ends, on any machine."""


def _cfg(tmp_path: Path, algo: str) -> Config:
    return Config(
        env_id=ENV_ID, algo=algo, total_timesteps=STEPS, max_minutes=MOMENT, feedback="synthetic",
        runs_dir=str(tmp_path), run_name=algo, progress=False, reward_model=QUICK_REWARD_FIT,
        ppo=PPOConfig(num_steps=BATCH, num_minibatches=4, update_epochs=1),
        sac=SACConfig(hidden_size=32, batch_size=32, learning_starts=BATCH, pretrain_steps=50,
                      iteration_steps=BATCH, buffer_size=STEPS),
        query=QueryConfig(total_labels=20, segment_length=10),
    )  # fmt: skip


@pytest.mark.parametrize("algo", ["ppo", "sac"])
def test_a_run_ends_on_the_clock_finished_and_a_resume_without_a_limit_completes_it(
    tmp_path: Path, algo: str, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg = _cfg(tmp_path, algo)
    first = run(cfg)
    assert first.status == "finished" and not first.interrupted
    assert first.env_steps <= BATCH < STEPS  # stopped at the first check after the moment
    root = tmp_path / algo
    assert (root / "checkpoints" / "reward_model.pt").is_file()  # finished: the models saved
    assert _listed(tmp_path, capsys).split()[2:4] == ["finished", "(--max-minutes)"]

    second = run(dataclasses.replace(cfg, resume=str(root), max_minutes=0.0))  # 0: no limit
    assert second.env_steps == STEPS and second.sessions == 2
    summary = json.loads((root / "summary.json").read_text())
    assert summary["status"] == "finished" and summary["env_steps"] == STEPS
    assert _listed(tmp_path, capsys).split()[2:4] == ["finished", f"{STEPS:,}"]  # steps ended it


def _listed(runs_dir: Path, capsys: pytest.CaptureFixture[str]) -> str:
    """The run's row in ``rlhf runs list``."""
    capsys.readouterr()
    main(["runs", "list", "--runs-dir", str(runs_dir)])
    _head, row = capsys.readouterr().out.splitlines()
    return row


def test_a_run_the_clock_ends_asks_its_labels_by_then(tmp_path: Path) -> None:
    """Steps for hours, minutes for seconds: the label schedule follows the clock, not the steps
    the run will never take (at --total-timesteps' schedule it would have asked about 10)."""
    labels = 40
    cfg = dataclasses.replace(
        _cfg(tmp_path, "ppo"),
        total_timesteps=10_000_000,
        max_minutes=0.1,
        query=QueryConfig(total_labels=labels, segment_length=10),
    )
    summary = run(cfg)
    assert summary.ended_on_time and summary.env_steps < 1_000_000
    assert summary.labels_used >= 0.75 * labels  # the last round's labels may come after it
