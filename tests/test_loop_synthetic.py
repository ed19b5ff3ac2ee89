"""End to end: `--feedback synthetic` learns from oracle labels alone, and logs what it promises."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from rlhf.config import Config, PPOConfig, QueryConfig
from rlhf.runner import run
from rlhf.store import LabelStore
from tests.toy_env import ENV_ID


def _cfg(tmp_path: Path, name: str, steps: int, labels: int, reward: str = "learned") -> Config:
    return Config(
        env_id=ENV_ID,
        total_timesteps=steps,
        seed=1,
        reward=reward,
        feedback="synthetic",
        runs_dir=str(tmp_path),
        run_name=name,
        progress=False,
        ppo=PPOConfig(num_steps=512, num_minibatches=8),
        query=QueryConfig(total_labels=labels, segment_length=10),
    )


@pytest.mark.slow
def test_synthetic_rlhf_improves_true_return(tmp_path: Path) -> None:
    """The policy never sees the env reward, yet its true return rises well above the initial one."""
    initial = run(_cfg(tmp_path, "initial", steps=512, labels=10, reward="env")).final_true_return
    summary = run(_cfg(tmp_path, "rlhf", steps=15360, labels=100))
    assert initial is not None and summary.final_true_return is not None
    assert initial < -45, initial  # a random walk stays far from the goal
    # Seeds 1-3 reach -16, -21, -35 here; true-reward PPO reaches ~ -12 on the same budget.
    assert summary.final_true_return > initial + 20, (initial, summary.final_true_return)
    assert summary.labels_used >= 90
    assert summary.reward_val_accuracy is not None and summary.reward_val_accuracy >= 0.8


def test_synthetic_run_records_labels_and_metrics(tmp_path: Path) -> None:
    summary = run(_cfg(tmp_path, "small", steps=2048, labels=40))
    root = tmp_path / "small"
    data = json.loads((root / "summary.json").read_text())
    assert data["labels_used"] == summary.labels_used > 0
    assert "reward_val_accuracy" in data
    store = LabelStore(root / "labels.sqlite")
    assert store.counts().labelled == 40  # the schedule requested exactly the budget
    assert all(label.source == "synthetic" for label in store.labels())
    acc = EventAccumulator(str(root / "tb"))
    acc.Reload()
    tags = set(acc.Tags()["scalars"])
    for tag in (
        "reward/train_loss",
        "reward/val_loss",
        "reward/val_accuracy",
        "reward/pearson_true",
        "labels/total",
        "labels/equal",
        "labels/skipped",
        "charts/episodic_return",
        "charts/sps",
    ):
        assert tag in tags, tag
    assert (root / "checkpoints" / "reward_model.pt").exists()
