"""Which leading entries of an observation are the robot's motion (joint positions, velocities).

Pure arrays, so both a live env (:func:`rlhf.envs.make.describe_env`) and a recorded segment
(``rlhf reward fit``, which never builds an env) find the same answer.
"""

from __future__ import annotations

import numpy as np

from rlhf.core.types import Segment


def motion_size(obs: np.ndarray, qpos: np.ndarray, qvel: np.ndarray) -> int | None:
    """How many leading entries of ``obs`` are the robot's joint positions and velocities: ``qpos``
    without the first few coordinates (those the env leaves out of its observation, such as
    the x of a walker), then ``qvel``, as gymnasium's MuJoCo robots build their observations.
    None when ``obs`` does not start that way (DeepMind Control's walker: orientations first)."""
    obs = np.asarray(obs, np.float64)
    for skip in range(min(len(qpos), 3) + 1):  # gymnasium leaves out at most x, y (and z)
        motion = np.concatenate([qpos[skip:], qvel])
        if len(motion) <= len(obs) and np.allclose(obs[: len(motion)], motion, atol=1e-6):
            return len(motion)
    return None


def segment_motion(segment: Segment) -> int | None:
    """:func:`motion_size` of a segment's first step (its observation then is the one taken in the
    physics state it recorded). None when the segment recorded no MuJoCo state."""
    if segment.qpos.shape[1] == 0 or segment.qvel.shape[1] == 0:
        return None
    return motion_size(segment.obs[0], segment.qpos[0], segment.qvel[0])
