"""--query.replay-share: pairs rolled out twice from one recorded state, with less and more noise."""

from __future__ import annotations

import dataclasses
import sqlite3
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

from rlhf.config import Config, ConfigError, QueryConfig
from rlhf.core.types import Segment
from rlhf.queries.replayed import NOISE_SCALES, Replayer
from rlhf.run.preflight import preflight
from rlhf.run.runner import run
from rlhf.store.records import unpack_segment
from tests.support.helpers import tb_scalars, tiny_config


def _recorded(env_id: str, steps: int, seed: int = 0) -> Segment:
    """A segment as a rollout records it: physics state before each step."""
    env = gym.make(env_id)
    obs, _ = env.reset(seed=seed)
    sim = env.unwrapped
    rows: dict[str, list] = {k: [] for k in ("obs", "act", "rew", "qpos", "qvel")}
    rng = np.random.default_rng(seed)
    for _ in range(steps):
        rows["qpos"].append(sim.data.qpos.copy())
        rows["qvel"].append(sim.data.qvel.copy())
        action = rng.uniform(-0.2, 0.2, env.action_space.shape)
        next_obs, reward, *_ = env.step(action)
        rows["obs"].append(obs)
        rows["act"].append(action)
        rows["rew"].append(reward)
        obs = next_obs
    return Segment(
        np.float32(rows["obs"]), np.float32(rows["act"]), np.float32(rows["rew"]),
        np.array(rows["qpos"]), np.array(rows["qvel"]), env_id,
    )  # fmt: skip


def test_both_halves_start_from_the_recorded_state_and_differ_in_noise_only() -> None:
    start = _recorded("HalfCheetah-v5", 20)
    replayer = Replayer(lambda: gym.make("HalfCheetah-v5"))
    std = np.full(6, 0.5)
    (pair,) = replayer.pairs([start], 1, lambda obs: np.zeros(6), std, np.random.default_rng(0))
    assert replayer.steps == 40
    for seg in (pair.left, pair.right):
        assert len(seg) == 20 and seg.absorbing == 0
        np.testing.assert_allclose(seg.qpos[0], start.qpos[0])
        np.testing.assert_allclose(seg.qvel[0], start.qvel[0])
        np.testing.assert_allclose(seg.obs[0], start.obs[0], atol=1e-6)
    spread = sorted(float(np.std(s.actions)) for s in (pair.left, pair.right))
    # mean action 0: each half's actions are its noise, std 0.5 x 0.3 and 0.5 x 1.5 (clipped)
    assert spread[0] == pytest.approx(0.5 * NOISE_SCALES[0], rel=0.25)
    assert spread[1] > 3 * spread[0]


def test_an_episode_that_ends_in_a_replay_is_padded_with_the_absorbing_state() -> None:
    start = _recorded("Hopper-v5", 50)
    replayer = Replayer(lambda: gym.make("Hopper-v5"))
    falls = lambda obs: np.array([1.0, -1.0, 1.0])  # noqa: E731  # full torque: a fall
    pairs = replayer.pairs([start], 1, falls, np.full(3, 0.1), np.random.default_rng(0))
    ended = [s for s in (pairs[0].left, pairs[0].right) if s.absorbing]
    assert ended, "full torque should end Hopper's episode within 50 steps"
    for seg in ended:
        assert len(seg) == 50
        assert not seg.obs[-seg.absorbing :].any() and not seg.true_rewards[-seg.absorbing :].any()


def _replaying(tmp_path: Path, steps: int) -> Config:
    """A tiny Hopper run that replays half of the pairs it asks at once."""
    query = QueryConfig(total_labels=40, segment_length=20, replay_share=0.5)
    return tiny_config(tmp_path, "Hopper-v5", total_timesteps=steps, query=query)


def test_a_run_asks_replayed_pairs_and_counts_their_steps(tmp_path: Path) -> None:
    run(_replaying(tmp_path, 4096))
    con = sqlite3.connect(tmp_path / "run" / "labels.sqlite")
    rows = con.execute(
        "select a.env_id, a.start_step, a.arrays, b.env_id, b.start_step, b.arrays"
        " from pairs p join segments a on a.id = p.left_segment"
        " join segments b on b.id = p.right_segment"
    ).fetchall()
    same_start = 0
    for env_a, step_a, blob_a, env_b, step_b, blob_b in rows:
        a, b = unpack_segment(env_a, step_a, blob_a), unpack_segment(env_b, step_b, blob_b)
        same_start += bool(np.array_equal(a.qpos[0], b.qpos[0]))
    # The first 25% come from the random policy; later rounds replay half of what they ask.
    assert 5 <= same_start < len(rows)
    steps = tb_scalars(tmp_path / "run" / "tb", "labels/replay_steps")
    assert steps[-1][1] >= 2 * 20 * 5


def test_replay_steps_go_on_counting_after_resume(tmp_path: Path) -> None:
    cfg = _replaying(tmp_path, 2048)
    first = run(cfg)
    assert first.replay_steps > 0
    more = dataclasses.replace(cfg.query, total_labels=80)  # so the second session asks too
    second = run(
        dataclasses.replace(cfg, resume=str(tmp_path / "run"), total_timesteps=4096, query=more)
    )
    assert second.sessions == 2 and second.replay_steps > first.replay_steps
    counts = tb_scalars(tmp_path / "run" / "tb", "labels/replay_steps")
    late = [value for step, value in counts if step > 2048]
    assert late and min(late) > first.replay_steps


@pytest.mark.parametrize(
    ("overrides", "needle"),
    [
        ({"algo": "sac"}, "--algo ppo only"),
        ({"env_id": "Pendulum-v1"}, "needs a MuJoCo env"),
        ({"terminations": "standard"}, "--terminations absorbing or fixed-horizon"),
    ],
)
def test_what_replays_cannot_do_is_refused_at_start(overrides: dict, needle: str) -> None:
    base = {"env_id": "Hopper-v5", "query": QueryConfig(replay_share=0.3)}
    with pytest.raises(ConfigError, match=r"--query\.replay-share") as info:
        preflight(Config(**(base | overrides)))
    assert needle in str(info.value)
