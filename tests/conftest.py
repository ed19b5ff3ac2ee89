"""Shared fixtures. Every test process runs torch on one thread and renders headless."""

from __future__ import annotations

import os

os.environ.setdefault("MUJOCO_GL", "egl")

import numpy as np
import pytest
import torch

torch.set_num_threads(1)


@pytest.fixture
def rng() -> np.random.Generator:
    """A seeded generator, so every random test input is reproducible."""
    return np.random.default_rng(0)
