"""Envs for sweep tests, registered in every Ray worker through the sweep's ``setup``.

Besides the toy task: the same at a fixed pace (so a test can stop a sweep in the middle of a
cell), one that raises mid-run (a bug in a cell), and one whose process dies mid-run the first
time (a killed worker: Ray reruns the cell, which resumes from its checkpoint).
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import gymnasium as gym
import numpy as np

from tests.support import toy_env

SLOW = "rlhf-test/SlowPointGoal-v0"
RAISES = "rlhf-test/Raises-v0"
DIES_ONCE = "rlhf-test/DiesOnce-v0"
DIE_MARKER = "RLHF_TEST_DIE_MARKER"
"""Environment variable: the file whose existence means the worker already died once."""
FAIL_AT = 700
"""Steps into a run when the failing envs fail (after the checkpoint of the 2nd iteration)."""


class Slow(toy_env.PointGoal):
    """The toy task at a fixed pace (2 ms a step), however busy the machine is or is not."""

    def step(self, action: np.ndarray):
        time.sleep(0.002)
        return super().step(action)


class Raises(toy_env.PointGoal):
    def __init__(self) -> None:
        super().__init__()
        self.steps = 0

    def step(self, action: np.ndarray):
        self.steps += 1
        if self.steps == FAIL_AT:
            raise RuntimeError(f"the env broke at step {FAIL_AT}")
        return super().step(action)


class DiesOnce(Raises):
    def step(self, action: np.ndarray):
        self.steps += 1
        marker = Path(os.environ[DIE_MARKER])
        if self.steps == FAIL_AT and not marker.exists():
            marker.touch()
            os.kill(os.getpid(), signal.SIGKILL)  # as the OOM killer would
        return toy_env.PointGoal.step(self, action)


def register() -> None:
    toy_env.register()
    for env_id, entry in ((SLOW, Slow), (RAISES, Raises), (DIES_ONCE, DiesOnce)):
        if env_id not in gym.registry:
            gym.register(env_id, entry_point=entry, max_episode_steps=50)
