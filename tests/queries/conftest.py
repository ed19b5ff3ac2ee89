"""The toy preference task and its fixtures (tests/support/toy_reward.py)."""

from tests.support.toy_reward import ToyTask, small_cfg, toy

__all__ = ["ToyTask", "small_cfg", "toy"]
