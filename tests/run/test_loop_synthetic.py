"""End to end: `--feedback synthetic` learns from oracle labels alone, and logs what it promises."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from rlhf.config import Config, PPOConfig, QueryConfig, TeacherConfig
from rlhf.queries.select import QuerySchedule
from rlhf.run.runner import run
from rlhf.store import LabelStore
from tests.support.toy_env import ENV_ID


def _cfg(
    tmp_path: Path, name: str, steps: int, labels: int, reward: str = "learned", seed: int = 1
) -> Config:
    return Config(
        env_id=ENV_ID,
        total_timesteps=steps,
        seed=seed,
        reward=reward,
        feedback="synthetic",
        runs_dir=str(tmp_path),
        run_name=name,
        progress=False,
        ppo=PPOConfig(num_steps=512, num_minibatches=8),
        query=QueryConfig(total_labels=labels, segment_length=10),
    )


@pytest.mark.slow
def test_synthetic_rlhf_improves_true_return(
    tmp_path: Path, learning_seed, record_property
) -> None:
    """The policy never sees the env reward, yet what the labels say reaches it: against the
    same run (same seed) taught by a teacher who flips every answer, its true return is far
    higher. Paired, because on this budget a single run's return swings with the seed.

    Seeds 1-7 (torch 2.13.0): taught -13, -16, -18, -36, -58, -45, -22 (random walk -39 to
    -63, true-reward PPO ~ -12); flipped -135, -147, -147, -102, -133, -147, -116; the gap is
    66 to 130, the bar 30. Held-out accuracy of the reward on seeds 1-10: 0.71 to 0.95, the
    bar 0.6 (about 20 held-out labels, so it moves in steps of 0.05)."""
    seed = learning_seed(1)
    taught = run(_cfg(tmp_path, "rlhf", steps=15360, labels=100, seed=seed))
    flipped_cfg = _cfg(tmp_path, "flipped", steps=15360, labels=100, seed=seed)
    flipped = run(replace(flipped_cfg, teacher=TeacherConfig(mistake=1.0)))
    record_property(
        "measured",
        f"{taught.final_true_return} {flipped.final_true_return} {taught.reward_val_accuracy}",
    )
    assert taught.final_true_return is not None and flipped.final_true_return is not None
    assert taught.final_true_return > flipped.final_true_return + 30, (taught, flipped)
    assert taught.labels_used >= 90
    assert taught.reward_val_accuracy is not None and taught.reward_val_accuracy >= 0.6


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


@pytest.mark.parametrize("threshold, early", [(None, False), (0.0, True)])
def test_a_run_asks_ahead_while_its_steps_are_new_and_spends_the_same_budget(
    tmp_path, threshold, early
) -> None:
    """Threshold 0: every rollout is new after the first labels; the run asks up to its lead
    ahead of the schedule, and ends with exactly the budget, as a run without it."""
    cfg = _cfg(tmp_path, "run", steps=4096, labels=40)
    cfg = replace(cfg, query=replace(cfg.query, ask_when_new=threshold, ask_ahead=0.25))
    run(cfg)
    acc = EventAccumulator(str(tmp_path / "run" / "tb"))
    acc.Reload()
    requested = {e.step: e.value for e in acc.Scalars("labels/requested")}
    schedule = QuerySchedule(40, 0.25, 4096)
    second = sorted(requested)[1]  # the first round after the initial labels
    assert (requested[second] == min(40, schedule.due(second) + 10)) is early
    assert requested[max(requested)] == 40
    assert ("labels/new_share" in acc.Tags()["scalars"]) is early


@pytest.mark.parametrize("until", [0.5, 1.0])
def test_every_label_is_asked_by_the_share_ask_until_names(tmp_path: Path, until: float) -> None:
    """--query.ask-until 0.5 over four iterations: the whole budget is asked by the second
    (step 1024), and the reward is fitted for the last time then, so the rest of the run learns
    from a reward that no longer changes; at 1 the labels are spread over the whole run."""
    base = _cfg(tmp_path, "run", steps=2048, labels=40)
    run(replace(base, query=replace(base.query, ask_until=until)))
    acc = EventAccumulator(str(tmp_path / "run" / "tb"))
    acc.Reload()
    requested = {e.step: e.value for e in acc.Scalars("labels/requested")}
    fitted = [e.step for e in acc.Scalars("labels/used")]
    assert requested[max(requested)] == 40
    assert (requested.get(1024) == 40) is (until == 0.5)
    assert (max(fitted) <= 1024) is (until == 0.5)


@pytest.mark.parametrize("reward", ["learned", "env"])
def test_the_policy_restarts_once_where_a_reward_is_learned(tmp_path: Path, reward: str) -> None:
    """--restart-at 0.5 over four iterations: the policy starts again before the third,
    once, with the labels still coming (the label budget is spent in full); on the env's reward
    it never does (nothing about that reward changes)."""
    base = _cfg(tmp_path, reward, steps=2048, labels=40, reward=reward)
    cfg = replace(base, ppo=replace(base.ppo, restart_at=0.5))
    run(cfg)
    acc = EventAccumulator(str(tmp_path / reward / "tb"))
    acc.Reload()
    tags = set(acc.Tags()["scalars"])
    if reward == "env":
        assert "charts/policy_restarted" not in tags
        return
    assert [e.step for e in acc.Scalars("charts/policy_restarted")] == [1024]
    assert LabelStore(tmp_path / reward / "labels.sqlite").counts().labelled == 40
    lrs = {e.step: e.value for e in acc.Scalars("charts/learning_rate")}
    # the third iteration learns at the full rate again, the fourth at half of it
    assert [lrs[1536], lrs[2048]] == pytest.approx([1.0, 0.5] * np.array(cfg.ppo.learning_rate))
