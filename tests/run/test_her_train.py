"""``rlhf train --algo sac --sac.her``: hindsight relabelling inside a run, on the tiny goal env of
tests/envs/test_goal_envs.py (its compute_reward is the negative distance to the goal)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

from rlhf.agent.her_buffer import HindsightReplayBuffer
from rlhf.cli import main
from rlhf.config import Config, QueryConfig, SACConfig
from rlhf.envs.goals import goal_reward_fn
from rlhf.run.checkpoint import load_checkpoint
from rlhf.run.lifecycle import Summary
from rlhf.run.preflight import preflight
from rlhf.run.runner import run
from tests.envs.test_goal_envs import TINY, _TinyGoal
from tests.support import toy_env
from tests.support.helpers import QUICK_REWARD_FIT

NO_REWARD = "rlhf-test/TinyGoalNoReward-v0"


class _NoComputeReward(_TinyGoal):
    compute_reward = None  # type: ignore[assignment]


if NO_REWARD not in gym.registry:
    gym.register(NO_REWARD, entry_point=_NoComputeReward, max_episode_steps=20)

SAC = SACConfig(
    learning_starts=100, iteration_steps=128, pretrain_steps=20, batch_size=32, her=True
)


def _cfg(tmp_path: Path, **kw) -> Config:
    base = dict(
        env_id=TINY,
        algo="sac",
        total_timesteps=512,
        feedback="synthetic",
        runs_dir=str(tmp_path),
        run_name="run",
        progress=False,
        checkpoint_every=1,
        sac=SAC,
        query=QueryConfig(total_labels=8, segment_length=10),
        reward_model=QUICK_REWARD_FIT,
    )
    return Config(**(base | kw))


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--env-id", TINY, "--sac.her"], "--sac.her needs --algo sac"),
        (["--env-id", toy_env.ENV_ID, "--algo", "sac", "--sac.her"], "--sac.her needs a goal"),
        (
            ["--env-id", NO_REWARD, "--algo", "sac", "--reward", "env", "--sac.her"],
            "--sac.her with --reward env needs the env's compute_reward",
        ),
        (["--env-id", TINY, "--algo", "sac", "--sac.her-future-k", "-1"], "--sac.her-future-k"),
        (
            ["--env-id", TINY, "--algo", "sac", "--sac.her", "--sac.recent-share", "0.5"],
            "--sac.recent-share draws from the plain replay buffer, not --sac.her's episodes",
        ),
    ],
)
def test_the_flag_is_refused_in_one_line_where_it_cannot_work(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], expected: str
) -> None:
    toy_env.register()
    with pytest.raises(SystemExit) as exited:
        main(["train", "--runs-dir", str(tmp_path), "--no-progress", *args])
    err = capsys.readouterr().err.strip()
    assert exited.value.code == 2 and expected in err and "\n" not in err, err
    assert not any(tmp_path.iterdir())  # refused before a run directory exists


def test_a_learned_reward_needs_no_compute_reward(tmp_path: Path) -> None:
    assert preflight(_cfg(tmp_path, env_id=NO_REWARD)).env.goal_size == 2


def _assert_trained_on_relabelled_goals(summary: Summary, run_dir: Path) -> None:
    assert summary.status == "finished" and summary.env_steps == 512
    assert summary.final_success_rate is not None
    state = load_checkpoint(run_dir / "checkpoints" / "last.pt")["replay"]
    steps_left = np.asarray(state["steps_left"])
    assert len(steps_left) == len(state["obs"]) > 400  # 512 steps, less the reset steps
    # 20-step episodes, stored whole (the one in progress cut): 19, 18, ..., 0 per episode.
    np.testing.assert_array_equal(steps_left[:40], [*range(19, -1, -1)] * 2)


def test_a_run_with_her_trains_on_relabelled_goals(tmp_path: Path) -> None:
    """On the env's reward; on a learned one it is the first session of the resume test below."""
    _assert_trained_on_relabelled_goals(run(_cfg(tmp_path, reward="env")), tmp_path / "run")


def test_env_rewards_of_relabelled_transitions_are_the_envs_compute_reward(
    tmp_path: Path,
) -> None:
    """A buffer filled by a real run, sampled as SAC samples it."""
    run(_cfg(tmp_path, reward="env", total_timesteps=256))
    state = load_checkpoint(tmp_path / "run" / "checkpoints" / "last.pt")["replay"]
    env = gym.make(TINY)
    buf = HindsightReplayBuffer(
        256, 7, 2, goal_size=2, future_k=4.0, goal_reward=goal_reward_fn(env)
    )
    buf.load_state_dict(state)
    batch = buf.sample(1000, np.random.default_rng(0))
    goal = batch.obs[:, -2:]
    np.testing.assert_array_equal(batch.next_obs[:, -2:], goal)
    relabelled = (goal != buf.obs[batch.indices, -2:]).any(axis=1)
    assert 0.7 < relabelled.mean() < 0.9
    expected = env.unwrapped.compute_reward(batch.next_obs[:, 3:5], goal, {})
    np.testing.assert_allclose(batch.rewards, expected, rtol=1e-6)
    # Where the goal is the episode's own, that is the reward the env gave on the step.
    stored = buf.true_rewards[batch.indices]
    np.testing.assert_allclose(batch.rewards[~relabelled], stored[~relabelled], atol=1e-6)


def test_resume_continues_with_the_her_buffer(tmp_path: Path) -> None:
    """A run with hindsight relabelling on a learned reward, then the same run resumed."""
    cfg = _cfg(tmp_path, reward="learned")
    first = run(cfg)
    _assert_trained_on_relabelled_goals(first, tmp_path / "run")
    assert first.labels_used > 0
    before = load_checkpoint(tmp_path / "run" / "checkpoints" / "last.pt")["replay"]
    resumed = run(dataclasses.replace(cfg, resume=str(tmp_path / "run"), total_timesteps=1024))
    assert resumed.status == "finished" and resumed.env_steps == 1024
    after = load_checkpoint(tmp_path / "run" / "checkpoints" / "last.pt")["replay"]
    n = len(before["obs"])
    assert len(after["obs"]) > n  # the resumed session added to the restored rows
    np.testing.assert_array_equal(np.asarray(after["obs"][:n]), np.asarray(before["obs"]))
    np.testing.assert_array_equal(
        np.asarray(after["steps_left"][:n]), np.asarray(before["steps_left"])
    )
