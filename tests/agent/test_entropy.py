"""PEBBLE's state-entropy reward: it grows with how spread out the visited states are."""

from __future__ import annotations

import numpy as np

from rlhf.agent.entropy import StateEntropyReward
from rlhf.agent.replay import ReplayBuffer


def _buffer(states: np.ndarray) -> ReplayBuffer:
    n, d = states.shape
    buf = ReplayBuffer(n, d, 1)
    zeros = np.zeros(n, np.float32)
    buf.add(states, np.zeros((n, 1), np.float32), states, zeros, zeros)
    return buf


def test_intrinsic_reward_grows_with_state_spread(rng: np.random.Generator) -> None:
    base = rng.normal(size=(500, 4)).astype(np.float32)
    means = []
    for spread in (0.1, 1.0, 10.0):
        states = base * spread
        reward = StateEntropyReward(_buffer(states), k=5, rng=rng)
        means.append(float(reward.distances(states[:64]).mean()))
    assert means[0] < means[1] < means[2], means
    np.testing.assert_allclose(means[1] / means[0], 10, rtol=1e-4)  # distances scale with it


def test_a_lone_state_earns_more_than_one_in_a_crowd(rng: np.random.Generator) -> None:
    crowd = rng.normal(scale=0.1, size=(300, 3)).astype(np.float32)
    lone = np.full((1, 3), 5.0, np.float32)
    states = np.concatenate([crowd, lone])
    reward = StateEntropyReward(_buffer(states), k=3, rng=rng)
    r = reward(states, np.zeros((len(states), 1), np.float32))
    assert r[-1] > 10 * r[:-1].max()
    assert r.dtype == np.float32 and r.shape == (301,)


def test_reference_states_are_subsampled_beyond_the_limit(rng: np.random.Generator) -> None:
    states = rng.uniform(size=(2000, 2)).astype(np.float32)
    reward = StateEntropyReward(_buffer(states), k=1, rng=rng, reference=100)
    far = reward.distances(states[:50]).mean()  # fewer neighbours to choose from: farther
    near = StateEntropyReward(_buffer(states), k=1, rng=rng).distances(states[:50]).mean()
    assert far > 2 * near


def test_the_distance_is_the_kth_nearest_other_state(rng: np.random.Generator) -> None:
    states = rng.normal(size=(200, 3)).astype(np.float32)
    reward = StateEntropyReward(_buffer(states), k=4, rng=rng)
    brute = np.sort(np.linalg.norm(states[:20, None] - states[None], axis=-1), axis=1)
    np.testing.assert_allclose(reward.distances(states[:20]), brute[:, 4], rtol=1e-4, atol=1e-5)
