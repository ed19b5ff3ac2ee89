"""The replay ring buffer: wrap-around, sampling against a hand-made reference, rewards at sample time."""

from __future__ import annotations

import numpy as np
import pytest

from rlhf.agent.replay import ENV_REWARD, ReplayBuffer


def _rows(start: int, n: int) -> dict[str, np.ndarray]:
    """n transitions numbered start..start+n-1: every field encodes its number."""
    k = np.arange(start, start + n, dtype=np.float32)
    return {
        "obs": np.stack([k, -k], axis=1),
        "actions": (k / 10)[:, None],
        "next_obs": np.stack([k + 0.5, -k - 0.5], axis=1),
        "terminated": (k % 3 == 0).astype(np.float32),
        "true_rewards": k * 100,
        "qpos": np.stack([k, k, k], axis=1).astype(np.float64),
        "qvel": (k * 2)[:, None].astype(np.float64),
    }


def _filled(capacity: int, batches: list[int], **kw) -> ReplayBuffer:
    buf = ReplayBuffer(capacity, obs_dim=2, act_dim=1, nq=3, nv=1, **kw)
    start = 0
    for n in batches:
        buf.add(**_rows(start, n))
        start += n
    return buf


def test_wrap_around_keeps_the_newest_rows_in_ring_order() -> None:
    buf = _filled(5, [3, 4])  # transitions 0..6 into 5 rows: 5 and 6 overwrite rows 0 and 1
    assert len(buf) == 5 and buf.pos == 2 and buf.added == 7
    np.testing.assert_array_equal(buf.obs[:, 0], [5, 6, 2, 3, 4])
    np.testing.assert_array_equal(buf.qpos[:, 0], [5, 6, 2, 3, 4])
    np.testing.assert_array_equal(buf.true_rewards, [500, 600, 200, 300, 400])
    oversized = _filled(4, [2, 9])  # a batch larger than the buffer: its newest 4 rows remain
    assert sorted(oversized.obs[:, 0].tolist()) == [7, 8, 9, 10]
    assert oversized.added == 11
    state = oversized.state_dict()  # oldest first
    np.testing.assert_array_equal(state["obs"][:, 0].numpy(), [7, 8, 9, 10])


def test_sampling_matches_a_hand_computed_reference() -> None:
    buf = _filled(5, [3, 4])
    batch = buf.sample(64, np.random.default_rng(7))
    expected_rows = np.random.default_rng(7).integers(0, 5, 64)  # uniform over the filled rows
    np.testing.assert_array_equal(batch.indices, expected_rows)
    number = np.array([5, 6, 2, 3, 4], np.float32)[expected_rows]  # what each row holds
    np.testing.assert_array_equal(batch.obs, np.stack([number, -number], axis=1))
    np.testing.assert_array_equal(batch.next_obs[:, 0], number + 0.5)
    np.testing.assert_array_equal(batch.actions[:, 0], number / 10)
    np.testing.assert_array_equal(batch.terminated, (number % 3 == 0).astype(np.float32))
    np.testing.assert_array_equal(batch.rewards, number * 100)  # ENV_REWARD: the stored reward
    partial = _filled(10, [3])  # not yet full: only rows 0..2 are drawn
    assert set(partial.sample(200, np.random.default_rng(0)).indices.tolist()) == {0, 1, 2}


@pytest.mark.parametrize("relabel", [False, True])
def test_rewards_follow_a_swapped_reward_function_without_relabelling(relabel: bool) -> None:
    buf = _filled(8, [6, 5], reward_fn=lambda obs, act: obs[:, 0] * 2, relabel=relabel)
    rng = np.random.default_rng(1)
    first = buf.sample(32, rng)
    np.testing.assert_allclose(first.rewards, first.obs[:, 0] * 2)
    buf.set_reward_fn(lambda obs, act: act[:, 0] - 1)  # a refitted reward: nothing else is called
    second = buf.sample(32, rng)
    np.testing.assert_allclose(second.rewards, second.actions[:, 0] - 1, rtol=1e-6)
    buf.add(**_rows(100, 2))  # rows added after the swap are scored by the new function too
    third = buf.transitions(np.arange(8))
    np.testing.assert_allclose(third.rewards, third.actions[:, 0] - 1, rtol=1e-6)


def test_sample_time_scoring_calls_the_function_only_on_the_minibatch() -> None:
    calls: list[int] = []

    def reward(obs: np.ndarray, act: np.ndarray) -> np.ndarray:
        calls.append(obs.shape[0])
        return obs[:, 0]

    buf = _filled(1000, [1000], reward_fn=reward)
    assert calls == []  # nothing is scored at insert or on a swap
    buf.sample(16, np.random.default_rng(0))
    assert calls == [16]


def test_no_reward_source_refuses_to_sample_and_state_round_trips() -> None:
    buf = _filled(6, [4, 4], reward_fn=None)
    assert not buf.ready()
    with pytest.raises(RuntimeError):
        buf.sample(4, np.random.default_rng(0))
    copy = ReplayBuffer(6, 2, 1, 3, 1, reward_fn=ENV_REWARD)
    copy.load_state_dict(buf.state_dict())
    idx = np.arange(6)
    a, b = buf.transitions, copy.transitions
    buf.set_reward_fn(ENV_REWARD)
    ordered = (buf.pos + idx) % 6
    np.testing.assert_array_equal(a(ordered).obs, b(idx).obs)
    np.testing.assert_array_equal(a(ordered).rewards, b(idx).rewards)
    np.testing.assert_array_equal(buf.qvel[ordered], copy.qvel)
    assert copy.added == buf.added == 8


def test_a_relabelling_buffer_scores_new_rows_only_when_a_minibatch_draws_one() -> None:
    calls: list[int] = []

    def reward(obs: np.ndarray, act: np.ndarray) -> np.ndarray:
        calls.append(obs.shape[0])
        return obs[:, 0] * 3

    buf = _filled(100, [50], reward_fn=reward, relabel=True)
    assert calls == []  # inserts score nothing
    buf.transitions(np.arange(10))
    assert calls == [50]  # every pending row, in one call
    buf.add(**_rows(50, 2))  # rows 50 and 51: not scored yet
    old = buf.transitions(np.arange(10))
    assert calls == [50]
    np.testing.assert_allclose(old.rewards, old.obs[:, 0] * 3)
    new = buf.transitions(np.array([3, 51]))  # draws a new row: the new rows are scored together
    assert calls == [50, 2]
    np.testing.assert_allclose(new.rewards, new.obs[:, 0] * 3)
    buf.set_reward_fn(reward)  # a refit: the whole buffer is relabelled at once
    assert calls == [50, 2, 52]
    buf.set_reward_fn(reward, per_sample=True)  # a reward that changes with every call
    buf.transitions(np.arange(4))
    assert calls == [50, 2, 52, 4]


def test_a_recent_share_draws_that_share_from_the_newest_rows_across_the_wrap() -> None:
    buf = _filled(50, [40, 30])  # transitions 0..69 in 50 rows: the newest, 60..69, wrap to 10..19
    buf.set_reward_fn(ENV_REWARD)
    rng = np.random.default_rng(0)
    batch = buf.sample(1000, rng, recent_share=0.25, recent=10)
    numbers = batch.obs[:, 0]
    assert (numbers[-250:] >= 60).all()  # every recent draw is one of the 10 newest
    assert set(numbers[-250:].astype(int)) == set(range(60, 70))
    assert (numbers[:750] < 60).mean() > 0.7  # the rest are uniform over all 50 (80% older)
    np.testing.assert_array_equal(batch.rewards, numbers * 100)
    # Without a share the draws are those of plain uniform sampling, for the same seed.
    plain = buf.sample(64, np.random.default_rng(1)).indices
    same = buf.sample(64, np.random.default_rng(1), recent_share=0.0, recent=10).indices
    np.testing.assert_array_equal(plain, same)
