"""A user's own target (``--teacher.reward MODULE:FUNCTION``): loaded from a module on PYTHONPATH or
from a file, refused in one line for each way it can be wrong (exit code 2, before a run directory
exists), and paid by :class:`rlhf.envs.TargetReward` instead of the env's reward."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

from rlhf.config import ConfigError, TeacherConfig
from rlhf.envs import ENV_REWARD, make_env, make_vec_env, with_target
from rlhf.envs.targets import RunTarget, target_fn
from rlhf.envs.user_reward import resolve_target
from rlhf.envs.wrappers import TargetError

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "guide" / "synthetic.md"

REWARDS = """
import numpy as np

def height(obs, action, next_obs, qpos, qvel):
    return qpos[:, 1] - 0.01 * np.sum(action**2, axis=1)

def anything(**kwargs):
    return kwargs["qvel"][:, 0]

def scalar(obs, action, next_obs, qpos, qvel):
    return 1.0

def column(obs, action, next_obs, qpos, qvel):
    return qpos[:, :1]

def not_finite(obs, action, next_obs, qpos, qvel):
    return np.full(len(qpos), np.nan)

def raises(obs, action, next_obs, qpos, qvel):
    raise ValueError("bad\\nstate")

def too_few(obs, action):
    return obs[:, 0]

def text(obs, action, next_obs, qpos, qvel):
    return np.array(["a"] * len(qpos))

NUMBER = 3
"""


@pytest.fixture
def rewards_file(tmp_path: Path) -> Path:
    path = tmp_path / "my_rewards.py"
    path.write_text(REWARDS)
    return path


@pytest.fixture
def on_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """A package ``userpkg_rl`` with ``rewards.py`` on sys.path; returns its module name."""
    package = tmp_path / "userpkg_rl"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "rewards.py").write_text(REWARDS)
    monkeypatch.syspath_prepend(str(tmp_path))
    return "userpkg_rl.rewards"


def _steps(env_id: str, n: int, seed: int = 0) -> dict[str, np.ndarray]:
    env = gym.make(env_id)
    obs, _ = env.reset(seed=seed)
    env.action_space.seed(seed)
    rows: dict[str, list] = {k: [] for k in ("obs", "action", "next_obs", "qpos", "qvel")}
    for _ in range(n):
        action = env.action_space.sample()
        next_obs, *_ = env.step(action)
        for key, value in zip(rows, (obs, action, next_obs, env.unwrapped.data.qpos.copy(),
                                     env.unwrapped.data.qvel.copy()), strict=True):  # fmt: skip
            rows[key].append(value)
        obs = next_obs
    env.close()
    return {k: np.stack(v) for k, v in rows.items()}


def test_a_function_from_a_module_on_the_python_path(on_path: str) -> None:
    target = resolve_target(None, f"{on_path}:height", "Hopper-v5")
    assert target is not None and target.name == f"{on_path}:height"
    batch = _steps("Hopper-v5", 5)
    expected = batch["qpos"][:, 1] - 0.01 * (batch["action"] ** 2).sum(axis=1)
    np.testing.assert_allclose(target.fn(**batch), expected)


def test_a_function_from_a_file(rewards_file: Path) -> None:
    target = resolve_target(None, f"{rewards_file}:anything", "HalfCheetah-v5")
    assert target is not None
    batch = _steps("HalfCheetah-v5", 4)
    np.testing.assert_allclose(target.fn(**batch), batch["qvel"][:, 0])


def test_the_guides_example_file_runs(tmp_path: Path) -> None:
    code = re.search(r"```python\n(# rewards\.py.*?)```", GUIDE.read_text(), re.S)
    assert code, "docs/guide/synthetic.md: the --teacher.reward example"
    (tmp_path / "rewards.py").write_text(code.group(1))
    target = resolve_target(None, f"{tmp_path / 'rewards.py'}:upright", "Hopper-v5")
    assert target is not None
    rewards = target.fn(**_steps("Hopper-v5", 20))  # random actions: it tips and travels
    assert rewards.shape == (20,) and np.all(rewards > 0)  # as it advises: ending never pays


REFUSALS = [  # (spec, with the file as {file} and the module as {mod}, what the line says)
    ("{file}:missing", r"has no attribute 'missing'"),
    ("{file}:NUMBER", r"NUMBER is not callable \(its type is int\)"),
    ("{file}:too_few", r"must accept the keyword arguments obs, action, next_obs, qpos, qvel"),
    ("{file}:raises", r"raised ValueError: bad state on two steps of Hopper-v5"),
    ("{file}:scalar", r"returned shape \(\) for a batch of 2 steps; .* shape \(B,\)"),
    ("{file}:column", r"returned shape \(2, 1\) for a batch of 2 steps"),
    ("{file}:not_finite", r"returned \[nan, nan\] for 2 steps; rewards must be finite"),
    ("{file}:text", r"rewards must be finite"),
    ("{mod}:missing", r"has no attribute 'missing'"),
    ("no_such_module_xyz.rewards:f", r"cannot import no_such_module_xyz\.rewards .*PYTHONPATH"),
    ("{dir}/absent.py:f", r"no such file .*absent\.py"),
    ("{dir}/broken.py:f", r"broken\.py has a syntax error at line 2"),
    ("{dir}/raising.py:f", r"importing .*raising\.py raised RuntimeError: at import time"),
]


@pytest.mark.parametrize(("spec", "says"), REFUSALS)
def test_each_way_a_function_can_be_wrong_is_one_line(
    spec: str, says: str, rewards_file: Path, on_path: str, tmp_path: Path
) -> None:
    (tmp_path / "broken.py").write_text("import numpy\ndef f(:\n    pass\n")
    (tmp_path / "raising.py").write_text("raise RuntimeError('at import time')\n")
    spec = spec.format(file=rewards_file, mod=on_path, dir=tmp_path)
    with pytest.raises(ConfigError) as err:
        resolve_target(None, spec, "Hopper-v5")
    message = str(err.value)
    assert "\n" not in message and message.startswith("--teacher.reward")
    assert re.search(says, message), message


def test_a_spec_without_a_function_and_both_flags_are_refused_by_the_config() -> None:
    with pytest.raises(ConfigError, match=r"^--teacher\.reward must be MODULE:FUNCTION .*'x\.py'$"):
        TeacherConfig(reward="x.py").validate()
    with pytest.raises(ConfigError, match="cannot both be set"):
        TeacherConfig(target="speed", reward="m:f").validate()
    with pytest.raises(ConfigError, match="choose one"):
        resolve_target("speed", "m:f", "Hopper-v5")


def test_the_command_line_refuses_before_making_a_run_directory(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    for flags, says in (
        (["--teacher.target", "moonwalk"], "--teacher.target moonwalk: unknown target; choose"),
        (["--teacher.reward", f"{tmp_path}/nope.py:f"], "--teacher.reward: no such file"),
    ):
        result = subprocess.run(
            [sys.executable, "-m", "rlhf", "train", "--env-id", "Hopper-v5",
             "--feedback", "synthetic", "--runs-dir", str(runs), *flags],
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert result.returncode == 2, result.stderr
        assert result.stderr.count("\n") == 1 and says in result.stderr, result.stderr
    assert not runs.exists() or not any(runs.iterdir())


def test_the_wrapper_pays_the_target_and_keeps_the_envs_reward() -> None:
    name = "backward"
    fn = target_fn(name, "HalfCheetah-v5")
    wrapped = with_target(make_env("HalfCheetah-v5"), RunTarget(name, fn))
    plain = make_env("HalfCheetah-v5")
    obs, _ = wrapped.reset(seed=4)
    plain.reset(seed=4)
    rng = np.random.default_rng(0)
    for _ in range(20):
        action = rng.uniform(-1, 1, 6).astype(np.float32)
        next_obs, reward, *_, info = wrapped.step(action)
        _, env_reward, *_ = plain.step(action)
        data = wrapped.unwrapped.data
        expected = fn(obs=obs[None], action=action[None], next_obs=next_obs[None],
                      qpos=data.qpos[None], qvel=data.qvel[None])  # fmt: skip
        assert reward == pytest.approx(float(expected[0]))
        assert info[ENV_REWARD] == env_reward and reward != env_reward
        obs = next_obs
    wrapped.close()
    plain.close()


def test_a_vector_env_with_a_target_pays_it_in_every_env() -> None:
    target = RunTarget("stand", target_fn("stand", "Hopper-v5"))
    envs = make_vec_env("Hopper-v5", 2, seed=0, target=target, fixed_horizon=True)
    envs.reset(seed=0)
    for _ in range(5):
        actions = envs.action_space.sample()
        _, rewards, terminated, _, info = envs.step(actions)
        sims = [e.unwrapped.data for e in envs.envs]
        qpos, qvel = np.stack([d.qpos for d in sims]), np.stack([d.qvel for d in sims])
        expected = target.fn(obs=None, action=actions, next_obs=None, qpos=qpos, qvel=qvel)
        np.testing.assert_allclose(rewards, expected)
        assert ENV_REWARD in info and not terminated.any()  # FixedHorizon still outermost
    envs.close()


def test_a_function_that_goes_wrong_mid_run_stops_it_in_one_line() -> None:
    calls = {"n": 0}

    def later_nan(obs, action, next_obs, qpos, qvel):
        calls["n"] += 1
        return np.full(len(qpos), np.nan if calls["n"] > 3 else 0.0)

    env = with_target(make_env("Hopper-v5"), RunTarget("later_nan", later_nan))
    env.reset(seed=0)
    for _ in range(3):
        env.step(env.action_space.sample())
    with pytest.raises(TargetError, match=r"^the target later_nan returned \[nan\]") as err:
        env.step(env.action_space.sample())
    assert isinstance(err.value, ConfigError)  # the command line says it in one line
    env.close()
