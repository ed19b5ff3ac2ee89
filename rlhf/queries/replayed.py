"""Replayed pairs (``--query.replay-share``): two segments from one recorded physics state that
differ in how hard the policy acts, not in where it starts.

In a run's own segments, action size and progress go together (the segments that move more also
spend more), so the labels tie the two and a learned reward can end up paying for large actions,
the opposite of a control cost (see the README's Ant results). A replayed pair breaks the tie:
from the first recorded state of a segment in the pool, the current policy is rolled out twice
for a segment's length, once with its exploration noise scaled by :data:`NOISE_SCALES` [0] and
once by [1]. Both are ordinary segments (physics state recorded, an episode end padded with the
absorbing state), so teachers, the page and the reward see nothing special.

The rollouts are env steps the agent never trains on; :attr:`Replayer.steps` counts them
(over the run: TensorBoard ``labels/replay_steps`` and ``replay_steps`` in summary.json). MuJoCo envs and PPO only (the state is set with
``set_state``; the noise is PPO's Gaussian).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np

from rlhf.core.types import Pair, Segment
from rlhf.queries.segments import padded_segment

NOISE_SCALES = (0.3, 1.5)
"""The policy's action noise (its std) is multiplied by these in the two halves of a pair."""


class Replayer:
    """Rolls the current policy out from recorded states, in an env of its own."""

    def __init__(self, make: Callable[[], gym.Env]) -> None:
        self._make = make
        self._env: gym.Env | None = None
        self.steps = 0
        """Env steps spent on replays in this session."""

    def pairs(
        self,
        pool: list[Segment],
        n: int,
        mean: Callable[[np.ndarray], np.ndarray],
        std: np.ndarray,
        rng: np.random.Generator,
    ) -> list[Pair]:
        """Up to ``n`` replayed pairs from distinct pool segments that did not end an episode
        (sides shuffled). ``mean(obs)``: the policy's mean action for one raw observation."""
        starts = [s for s in pool if s.absorbing == 0 and s.qpos.shape[1] > 0]
        chosen = rng.choice(len(starts), size=min(n, len(starts)), replace=False)
        out = []
        for i in chosen:
            start = starts[int(i)]
            low, high = (self._roll(start, mean, k * std, rng) for k in NOISE_SCALES)
            out.append(Pair(low, high) if rng.random() < 0.5 else Pair(high, low))
        return out

    def close(self) -> None:
        if self._env is not None:
            self._env.close()

    def _roll(
        self,
        start: Segment,
        mean: Callable[[np.ndarray], np.ndarray],
        std: np.ndarray,
        rng: np.random.Generator,
    ) -> Segment:
        env = self._env = self._env or self._make()
        sim: Any = env.unwrapped
        env.reset(seed=int(rng.integers(1 << 30)))
        sim.set_state(start.qpos[0], start.qvel[0])
        obs = sim._get_obs()  # the observation of the state just set (gymnasium MuJoCo envs)
        low, high = env.action_space.low, env.action_space.high
        rows: dict[str, list] = {k: [] for k in ("obs", "actions", "rewards", "qpos", "qvel")}
        length = len(start)
        for _ in range(length):
            rows["qpos"].append(sim.data.qpos.copy())
            rows["qvel"].append(sim.data.qvel.copy())
            action = np.clip(mean(obs) + std * rng.normal(size=std.shape), low, high)
            next_obs, reward, terminated, _, _ = env.step(action)
            rows["obs"].append(obs)
            rows["actions"].append(action)
            rows["rewards"].append(reward)
            self.steps += 1
            obs = next_obs
            if terminated:
                break
        return _segment(rows, length, start)


def _segment(rows: dict[str, list], length: int, start: Segment) -> Segment:
    """A segment of ``length`` steps from the recorded rows, an early end padded as a rollout's
    segments are (:func:`rlhf.queries.segments.padded_segment`)."""
    return padded_segment(
        np.asarray(rows["obs"], np.float32),
        np.asarray(rows["actions"], np.float32),
        np.asarray(rows["rewards"], np.float32),
        np.asarray(rows["qpos"]),
        np.asarray(rows["qvel"]),
        start.env_id,
        start.start_step,
        length - len(rows["obs"]),
    )
