"""A target behaviour (``--teacher.target``) is the run's true reward end to end: the synthetic
teacher labels by it (replayed pairs too), ``--reward env`` trains on it (PPO and SAC), and the
run reports it (TensorBoard, summary.json, the page's meta, config.json for ``--resume``)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from rlhf.agent.ppo_learner import PPOLearner
from rlhf.config import Config, ConfigError, QueryConfig, SACConfig, TeacherConfig
from rlhf.core.types import Answer, Segment
from rlhf.envs.targets import target_fn
from rlhf.run.run_dir import read_config, resumed_config
from rlhf.run.runner import run
from rlhf.store import LabelStore
from rlhf.store.meta import TARGET_META
from tests.support.helpers import tb_scalars, tiny_config

ENV_ID = "Hopper-v5"  # random episodes end within a rollout, so returns are reported


def _target_on_segment(fn, segment: Segment) -> tuple[np.ndarray, np.ndarray]:
    """(the target's reward, the segment's true reward) of each step whose state after the step
    the segment holds: every real step but its last (its next row is the state after it)."""
    real = len(segment) - segment.absorbing
    steps = slice(0, real - 1)
    expected = fn(
        obs=segment.obs[steps], action=segment.actions[steps], next_obs=segment.obs[1:real],
        qpos=segment.qpos[1:real], qvel=segment.qvel[1:real],
    )  # fmt: skip
    return expected, segment.true_rewards[steps]


def test_the_teacher_labels_by_the_target_and_the_run_reports_it(tmp_path: Path) -> None:
    cfg = tiny_config(
        tmp_path, ENV_ID, total_timesteps=1536, teacher=TeacherConfig(target="backward"),
        query=QueryConfig(total_labels=16, replay_share=0.5),
    )  # fmt: skip
    summary = run(cfg)
    root = tmp_path / "run"
    assert summary.replay_steps > 0  # replayed pairs were asked for, from the same target
    fn = target_fn("backward", ENV_ID)
    store = LabelStore(root / "labels.sqlite")
    labels = store.labels()
    assert len(labels) == 16
    checked = 0
    for label in labels:
        pair = store.get_pair(label.pair_id)
        for segment in (pair.left, pair.right):
            expected, true = _target_on_segment(fn, segment)
            np.testing.assert_allclose(true, expected, rtol=1e-5, atol=1e-5)
            checked += len(true)
        left, right = pair.left.true_rewards.sum(), pair.right.true_rewards.sum()
        assert label.answer == (Answer.LEFT if left > right else Answer.RIGHT)  # the oracle
    assert checked > 100
    assert store.get_meta(TARGET_META) == "backward"  # the page says whose return it draws

    tb = root / "tb"
    returns = tb_scalars(tb, "charts/episodic_return")
    assert returns and tb_scalars(tb, "charts/target_return") == returns
    env_returns = tb_scalars(tb, "charts/env_return")
    assert len(env_returns) == len(returns) and env_returns != returns
    assert tb_scalars(tb, "reward/pearson_env")  # the learned reward against the env's own

    data = json.loads((root / "summary.json").read_text())
    assert data["target"] == "backward"
    assert data["final_target_return"] == data["final_true_return"] is not None
    assert data["final_env_return"] is not None
    assert data["final_env_return"] != data["final_true_return"]
    assert read_config(root).teacher.target == "backward"  # --resume keeps it


def test_true_reward_ppo_trains_on_the_target(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """--reward env with a target is the target's baseline: PPO learns from its rewards."""
    seen = []
    learn = PPOLearner.learn

    def spy(self, rollout, rewards, *args, **kwargs):
        seen.append((rollout.raw, np.array(rewards)))
        return learn(self, rollout, rewards, *args, **kwargs)

    monkeypatch.setattr(PPOLearner, "learn", spy)
    cfg = tiny_config(tmp_path, ENV_ID, reward="env", teacher=TeacherConfig(target="stand"))
    summary = run(cfg)
    assert summary.target == "stand" and summary.final_env_return is not None
    (raw, rewards), = seen  # fmt: skip
    fn = target_fn("stand", ENV_ID)
    # Step t's state after it is row t + 1, where t did not end the episode (t + 1 is no reset).
    keep = raw.valid[:-1] & raw.valid[1:] & ~raw.terminated[:-1] & ~raw.truncated[:-1]
    t = np.flatnonzero(keep[:, 0])
    assert len(t) > 300
    expected = fn(
        obs=raw.obs[t, 0], action=raw.actions[t, 0], next_obs=raw.obs[t + 1, 0],
        qpos=raw.qpos[t + 1, 0], qvel=raw.qvel[t + 1, 0],
    )  # fmt: skip
    np.testing.assert_allclose(rewards[t, 0], expected, rtol=1e-5, atol=1e-5)


def test_sac_on_the_envs_reward_takes_the_target_too(tmp_path: Path) -> None:
    cfg = tiny_config(
        tmp_path, ENV_ID, algo="sac", reward="env", total_timesteps=400,
        teacher=TeacherConfig(target="hop"),
        sac=SACConfig(iteration_steps=200, learning_starts=100, batch_size=32),
    )  # fmt: skip
    summary = run(cfg)
    assert summary.target == "hop" and summary.final_env_return is not None
    tb = tmp_path / "run" / "tb"
    assert tb_scalars(tb, "charts/target_return") == tb_scalars(tb, "charts/episodic_return")
    assert tb_scalars(tb, "charts/env_return")


def test_a_run_without_a_target_reports_the_envs_return_only(tmp_path: Path) -> None:
    summary = run(tiny_config(tmp_path, ENV_ID, reward="env"))
    assert summary.target is None and summary.final_target_return is None
    assert summary.final_env_return is None and summary.final_true_return is not None
    tb = tmp_path / "run" / "tb"
    assert tb_scalars(tb, "charts/episodic_return")
    assert not tb_scalars(tb, "charts/target_return") and not tb_scalars(tb, "charts/env_return")


def test_a_resumed_run_keeps_its_target(tmp_path: Path) -> None:
    stored = Config(teacher=TeacherConfig(target="backward"), run_name="r", runs_dir=str(tmp_path))
    changed = replace(stored, teacher=TeacherConfig(target="speed"))
    with pytest.raises(ConfigError, match=r"--teacher\.target cannot change on --resume"):
        resumed_config(tmp_path / "r", stored, changed)


def test_a_file_target_is_stored_with_its_absolute_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "mine.py").write_text(
        "def still(obs, action, next_obs, qpos, qvel):\n    return -abs(qvel[:, 0])\n"
    )
    monkeypatch.chdir(tmp_path)
    cfg = tiny_config(tmp_path, ENV_ID, reward="env", teacher=TeacherConfig(reward="mine.py:still"))
    summary = run(cfg)
    assert summary.target == f"{tmp_path / 'mine.py'}:still"
    assert read_config(tmp_path / "run").teacher.reward == summary.target
