"""GAE against a hand-computed reference, including truncation, termination and autoreset."""

import numpy as np
import pytest

from rlhf.agent.rollout import RewardScaler, RunningMeanStd, compute_gae

GAMMA, LAM = 0.9, 0.8


def _reference() -> dict[str, np.ndarray]:
    """One env, 6 rows: an episode truncated at row 1, an autoreset row 2, then an episode
    terminated at row 4, an autoreset row 5; last_value bootstraps after row 5."""
    return {
        "rewards": np.array([[1.0], [2.0], [0.0], [3.0], [4.0], [0.0]], np.float32),
        "values": np.array([[0.5], [0.6], [0.7], [0.8], [0.9], [1.0]], np.float32),
        "last_values": np.array([2.0], np.float32),
        "terminated": np.array([[0], [0], [0], [0], [1], [0]], bool),
        "truncated": np.array([[0], [1], [0], [0], [0], [0]], bool),
        "valid": np.array([[1], [1], [0], [1], [1], [0]], bool),
    }


def test_gae_matches_hand_computation() -> None:
    d = _reference()
    adv, ret = compute_gae(**d, gamma=GAMMA, gae_lambda=LAM)
    # Row 1 is truncated: it bootstraps from V(final obs) = values[2] (the obs of the reset row).
    delta1 = 2.0 + GAMMA * 0.7 - 0.6
    # Row 0 continues into row 1 (same episode).
    delta0 = 1.0 + GAMMA * 0.6 - 0.5
    adv0 = delta0 + GAMMA * LAM * delta1
    # Row 4 is terminated: no bootstrap.
    delta4 = 4.0 - 0.9
    delta3 = 3.0 + GAMMA * 0.9 - 0.8
    adv3 = delta3 + GAMMA * LAM * delta4
    expected = np.array([[adv0], [delta1], [0.0], [adv3], [delta4], [0.0]], np.float32)
    np.testing.assert_allclose(adv, expected, rtol=1e-6)
    np.testing.assert_allclose(ret, expected + d["values"], rtol=1e-6)


def test_gae_bootstraps_from_last_value_at_rollout_end() -> None:
    rewards = np.array([[1.0], [1.0]], np.float32)
    values = np.array([[0.0], [0.0]], np.float32)
    no = np.zeros((2, 1), bool)
    adv, _ = compute_gae(rewards, values, np.array([10.0], np.float32), no, no, ~no, GAMMA, LAM)
    delta1 = 1.0 + GAMMA * 10.0
    delta0 = 1.0
    np.testing.assert_allclose(adv[:, 0], [delta0 + GAMMA * LAM * delta1, delta1], rtol=1e-6)


def test_truncation_at_rollout_end_bootstraps_but_termination_does_not() -> None:
    rewards = np.array([[1.0, 1.0]], np.float32)
    values = np.zeros((1, 2), np.float32)
    last = np.array([5.0, 5.0], np.float32)
    terminated = np.array([[False, True]])
    truncated = np.array([[True, False]])
    adv, _ = compute_gae(
        rewards, values, last, terminated, truncated, np.ones((1, 2), bool), GAMMA, LAM
    )
    np.testing.assert_allclose(adv[0], [1.0 + GAMMA * 5.0, 1.0], rtol=1e-6)


def test_gae_columns_are_independent(rng: np.random.Generator) -> None:
    d = _reference()
    two = {
        k: np.concatenate([v, v], axis=-1) if v.ndim == 2 else np.concatenate([v, v])
        for k, v in d.items()
    }
    two["rewards"][:, 1] += rng.normal(size=6).astype(np.float32)
    adv_one, _ = compute_gae(**d, gamma=GAMMA, gae_lambda=LAM)
    adv_two, _ = compute_gae(**two, gamma=GAMMA, gae_lambda=LAM)
    np.testing.assert_allclose(adv_two[:, :1], adv_one, rtol=1e-6)
    assert not np.allclose(adv_two[:, 1], adv_one[:, 0])


def test_running_mean_std_matches_numpy(rng: np.random.Generator) -> None:
    data = rng.normal(3.0, 2.0, size=(1000, 4))
    rms = RunningMeanStd((4,), epsilon=0.0)
    for chunk in np.array_split(data, 7):
        rms.update(chunk)
    np.testing.assert_allclose(rms.mean, data.mean(0), rtol=1e-10)
    np.testing.assert_allclose(rms.var, data.var(0), rtol=1e-10)


def test_reward_scaler_keeps_sign_and_offset_and_ignores_reset_rows() -> None:
    scaler = RewardScaler(num_envs=1, gamma=0.99)
    rewards = np.full((100, 1), 5.0, np.float32)
    valid = np.ones((100, 1), bool)
    valid[50] = False
    dones = np.zeros((100, 1), bool)
    dones[49] = True
    scaled = scaler(rewards, dones, valid)
    assert (scaled > 0).all()
    # a constant reward stays constant (scale only, no centring)
    assert np.ptp(scaled) == pytest.approx(0.0)
    assert scaler.rms.count == pytest.approx(99, abs=1e-3)


def test_a_termination_bootstraps_from_the_given_terminal_value() -> None:
    """With a learned absorbing reward, ending an episode is worth staying ended forever."""
    d = _reference()
    adv, _ = compute_gae(**d, gamma=GAMMA, gae_lambda=LAM, terminal_value=-5.0)
    delta4 = 4.0 + GAMMA * -5.0 - 0.9  # row 4 terminated: bootstraps from the terminal value
    delta3 = 3.0 + GAMMA * 0.9 - 0.8
    assert adv[4, 0] == pytest.approx(delta4)
    assert adv[3, 0] == pytest.approx(delta3 + GAMMA * LAM * delta4)
    # A truncation still bootstraps from V(final obs), not from the terminal value.
    plain, _ = compute_gae(**d, gamma=GAMMA, gae_lambda=LAM)
    assert adv[1, 0] == pytest.approx(plain[1, 0]) and adv[0, 0] == pytest.approx(plain[0, 0])
