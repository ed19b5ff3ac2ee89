"""scripts/check_reward.py and rlhf.reward.check: a learned reward scored against the true one."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

from rlhf.config import TeacherConfig
from rlhf.envs import TargetReward
from rlhf.reward.check import BEHAVIOURS, check_reward
from rlhf.run.runner import run
from tests.support.helpers import tiny_config

ROOT = Path(__file__).resolve().parents[2]


class _Remember(gym.Wrapper):
    """Remembers the true reward of every (observation, action) it steps from."""

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        self.seen: dict[bytes, float] = {}
        self._obs: np.ndarray | None = None

    def reset(self, **kw):
        self._obs, info = self.env.reset(**kw)
        return self._obs, info

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        self.seen[_key(self._obs, action)] = float(reward)
        self._obs = obs
        return obs, reward, terminated, truncated, info


def _key(obs: np.ndarray, action: np.ndarray) -> bytes:
    return np.float32(obs).tobytes() + np.float32(action).tobytes()


def _true(env: _Remember, obs: np.ndarray, actions: np.ndarray) -> np.ndarray:
    return np.array([env.seen[_key(o, a)] for o, a in zip(obs, actions, strict=True)])


def _hopper() -> _Remember:
    return _Remember(gym.make("Hopper-v5"))


def _lean(obs: np.ndarray) -> np.ndarray:
    return np.array([0.3, -0.2, 0.1])  # a crude hopper that falls within a few dozen steps


def test_an_affine_copy_of_the_true_reward_fits_exactly_everywhere() -> None:
    env = _hopper()
    check = check_reward(lambda o, a: 0.5 * _true(env, o, a) - 1.0, -1.0, env, _lean, 2)
    assert check.slope == pytest.approx(0.5) and check.intercept == pytest.approx(-1.0)
    assert [r.name for r in check.behaviours] == [b[0] for b in BEHAVIOURS]
    for row in check.behaviours:
        assert row.residual == pytest.approx(0.0, abs=1e-9)
        assert row.pearson == pytest.approx(1.0)
    assert check.terms["reward_forward"] > 0.5
    assert check.before_end and all(
        res == pytest.approx(0, abs=1e-9) for *_, res in check.before_end
    )


def test_a_reward_that_undervalues_standing_still_shows_only_there() -> None:
    env = _hopper()

    def reward(obs: np.ndarray, actions: np.ndarray) -> np.ndarray:
        still = np.all(actions == 0, axis=1)
        return 0.5 * _true(env, obs, actions) - 1.0 - 2.0 * still

    rows = {r.name: r for r in check_reward(reward, None, env, _lean, 2).behaviours}
    assert rows["zero actions"].residual == pytest.approx(-2.0)
    assert all(abs(r.residual) < 1e-9 for name, r in rows.items() if name != "zero actions")


def test_a_reward_of_the_control_cost_alone_correlates_with_that_term_only() -> None:
    env = _hopper()

    def ctrl(obs: np.ndarray, actions: np.ndarray) -> np.ndarray:  # Hopper-v5's control cost
        return -1e-3 * np.sum(np.clip(actions, -1, 1) ** 2, axis=1)

    check = check_reward(ctrl, None, env, lambda o: np.array([0.3, -0.2, 0.1]), 2)
    # The agent acts with noise 0.1, so its action costs vary from step to step.
    assert check.terms["reward_ctrl"] == pytest.approx(1.0)
    assert abs(check.terms["reward_forward"]) < 0.9


@pytest.mark.slow
def test_the_script_reads_a_run_and_prints_every_section(tmp_path: Path) -> None:
    cfg = tiny_config(tmp_path, "Hopper-v5", total_timesteps=1024)
    run(cfg)
    spec = importlib.util.spec_from_file_location(
        "check_reward", ROOT / "scripts" / "check_reward.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    text = module.main([str(tmp_path / "run"), "--episodes", "1"])
    assert text.startswith("Hopper-v5: on the agent's steps, learned = ")
    for part in ("zero actions", "random actions", "reward_forward", "learned absorbing reward"):
        assert part in text


def test_the_script_scores_a_target_run_against_its_target(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """--teacher.target: the true reward the script scores against is the target's."""
    run(tiny_config(tmp_path, "Hopper-v5", teacher=TeacherConfig(target="stand")))
    spec = importlib.util.spec_from_file_location(
        "check_reward", ROOT / "scripts" / "check_reward.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    seen = []

    def spy(reward, absorbing, env, act, episodes, seed):
        seen.append(env)
        return check_reward(reward, absorbing, env, act, episodes, seed)

    monkeypatch.setattr(module, "check_reward", spy)
    module.main([str(tmp_path / "run"), "--episodes", "1"])
    (env,) = seen
    assert isinstance(env, TargetReward)
    env.reset(seed=0)
    _, reward, *_, info = env.step(np.zeros(3))
    assert reward != info["env_reward"]
