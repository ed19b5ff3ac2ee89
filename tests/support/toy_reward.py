"""A toy preference task with a known reward, shared by the reward and query-selection tests
(their conftests import its fixtures)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest

from rlhf.config import RewardConfig
from rlhf.config.presets import general_reward
from rlhf.core.types import Pair, Preference, Segment


@dataclass(frozen=True)
class ToyTask:
    """HalfCheetah-shaped reward: a "forward velocity" feature minus a quadratic control cost.

    Each segment drifts around its own random centre, as an episode stays in one region of the
    state space, so segment returns differ by more than step-level noise.
    """

    obs_dim: int = 17
    act_dim: int = 6
    length: int = 25

    @staticmethod
    def reward(obs: np.ndarray, act: np.ndarray) -> np.ndarray:
        return obs[..., 8] - 0.1 * (act**2).sum(-1)

    def segment(self, rng: np.random.Generator, length: int | None = None) -> Segment:
        t = length or self.length
        obs = rng.normal(size=(1, self.obs_dim)) + 0.5 * rng.normal(size=(t, self.obs_dim))
        act = rng.normal(size=(1, self.act_dim)) + 0.5 * rng.normal(size=(t, self.act_dim))
        act = np.clip(act, -1, 1)
        empty = np.zeros((t, 0))
        return Segment(
            obs=obs.astype(np.float32),
            actions=act.astype(np.float32),
            true_rewards=self.reward(obs, act).astype(np.float32),
            qpos=empty,
            qvel=empty,
            env_id="Toy-v0",
        )

    def steps(self, rng: np.random.Generator, n: int = 300, scale: float = 1.0):
        """``n`` unrelated (obs, action) rows; obs centred at 3 with std ``scale``."""
        obs = (scale * rng.normal(size=(n, self.obs_dim)) + 3.0).astype(np.float32)
        act = rng.uniform(-1, 1, size=(n, self.act_dim)).astype(np.float32)
        return obs, act

    def pairs(self, n: int, rng: np.random.Generator) -> list[Pair]:
        return [Pair(self.segment(rng), self.segment(rng)) for _ in range(n)]

    def preferences(self, n: int, rng: np.random.Generator) -> list[Preference]:
        """Pairs labelled by the true return (the oracle)."""
        return [
            Preference(p, 1.0 if p.left.true_return > p.right.true_return else 0.0)
            for p in self.pairs(n, rng)
        ]


@pytest.fixture
def toy() -> ToyTask:
    return ToyTask()


@pytest.fixture
def small_cfg() -> RewardConfig:
    """A small, fast ensemble for tests that do not measure how well it learns."""
    cfg = RewardConfig(hidden_sizes=(32, 32), learning_rate=1e-3, max_epochs=20, patience=3)
    return general_reward(cfg)  # a validation split, as outside a run
