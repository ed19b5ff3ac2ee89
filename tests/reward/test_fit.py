"""``rlhf reward fit`` reads what a run reads: by default the joint positions and velocities,
found from the physics state the dataset's segments recorded (no env is built)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from rlhf.config import RewardConfig
from rlhf.core.motion import segment_motion
from rlhf.core.types import Pair, Preference, Segment
from rlhf.reward.fit import fit_offline

T, NQ, NV, EXTRA, ACT = 6, 5, 4, 7, 2  # an Ant-like robot: x, y left out; 7 more entries


def _segment(rng: np.random.Generator, with_state: bool = True) -> Segment:
    qpos, qvel = rng.normal(size=(T, NQ)), rng.normal(size=(T, NV))
    obs = np.concatenate([qpos[:, 2:], qvel, rng.normal(size=(T, EXTRA))], axis=1)
    return Segment(
        obs=obs.astype(np.float32),
        actions=rng.normal(size=(T, ACT)).astype(np.float32),
        true_rewards=obs[:, 0].astype(np.float32),
        qpos=qpos if with_state else np.zeros((T, 0)),
        qvel=qvel if with_state else np.zeros((T, 0)),
        env_id="Toy-v0",
    )


def _prefs(with_state: bool = True, n: int = 8) -> list[Preference]:
    rng = np.random.default_rng(0)
    return [
        Preference(Pair(_segment(rng, with_state), _segment(rng, with_state)), float(i % 2))
        for i in range(n)
    ]


CFG = RewardConfig(hidden_sizes=(16,), ensemble_size=2, max_epochs=2)
MOTION = NQ - 2 + NV


@pytest.mark.parametrize(
    ("sees", "with_state", "seen"),
    [("motion", True, MOTION), ("observation", True, None), ("motion", False, None)],
)
def test_an_offline_fit_reads_the_motion_its_segments_recorded(
    sees: str, with_state: bool, seen: int | None
) -> None:
    cfg = dataclasses.replace(CFG, sees=sees)
    learner, _ = fit_offline(_prefs(with_state), cfg, test_fraction=0.25, seed=0)
    assert learner.ensemble.seen_obs == seen
    assert learner.state_dict()["seen_obs"] == seen  # and the saved reward says so
    said = learner.ensemble.what_it_reads()  # and the command tells the user
    assert (
        said is None if seen is None else said.startswith(f"reads {seen} of the {MOTION + EXTRA}")
    )


def test_the_motion_of_a_segment_is_found_past_the_coordinates_left_out() -> None:
    segment = _segment(np.random.default_rng(1))
    assert segment_motion(segment) == MOTION
    shuffled = dataclasses.replace(segment, obs=segment.obs[:, ::-1].copy())
    assert segment_motion(shuffled) is None
