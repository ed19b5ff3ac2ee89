"""Goal-conditioned envs in `rlhf train`: one flat vector per step (observation, achieved goal,
desired goal), the env's success kept and reported, and clips that draw each segment's own goal.

The mechanism is tested on a tiny goal env registered here (CI has no gymnasium-robotics); the
gymnasium-robotics envs themselves are tested where it is installed."""

from __future__ import annotations

import subprocess
import sys
from importlib.metadata import PackageNotFoundError
from pathlib import Path

import gymnasium as gym
import imageio_ffmpeg
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

from rlhf.config import Config, ConfigError, PPOConfig, QueryConfig, SACConfig, VideoConfig
from rlhf.core.shell import install_extra
from rlhf.core.types import Segment
from rlhf.envs import FlatGoalObservation, describe_env, goals, make_env, make_vec_env
from rlhf.envs.goals import GOAL_TASK, SUCCESS, goal_env_problem
from rlhf.envs.state import mujoco_sim
from rlhf.render.video import make_renderer, render_pair_video, segment_frames
from rlhf.run.preflight import preflight
from rlhf.run.runner import run
from rlhf.store import LabelStore
from tests.support import toy_env
from tests.support.helpers import QUICK_REWARD_FIT, tb_scalars, tiny_config

TINY = "rlhf-test/TinyGoal-v0"
DICT = "rlhf-test/DictObs-v0"


def _box(n: int) -> gym.spaces.Box:
    return gym.spaces.Box(-np.inf, np.inf, (n,), np.float64)


class _TinyGoal(gym.Env):
    """A point that moves towards a goal; dict observations, and its success flag named as
    gymnasium-robotics' mazes name it (``success``)."""

    def __init__(self) -> None:
        self.observation_space = gym.spaces.Dict(
            {"observation": _box(3), "achieved_goal": _box(2), "desired_goal": _box(2)}
        )
        self.action_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)

    def _obs(self) -> dict[str, np.ndarray]:
        return {
            "observation": np.array([*self.pos, 7.0]),
            "achieved_goal": self.pos.copy(),
            "desired_goal": self.goal.copy(),
        }

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        self.pos = self.np_random.uniform(-1.0, 1.0, 2)
        self.goal = self.np_random.uniform(-1.0, 1.0, 2)
        return self._obs(), {"success": False}

    def step(self, action: np.ndarray):
        self.pos = self.pos + 0.2 * np.clip(action, -1.0, 1.0)
        distance = float(np.linalg.norm(self.pos - self.goal))
        return self._obs(), -distance, False, False, {"success": distance < 0.3}

    def compute_reward(self, achieved: np.ndarray, desired: np.ndarray, info: object) -> np.ndarray:
        """The step's reward for any (achieved, desired) goals, batched: what HER relabels with."""
        return -np.linalg.norm(np.asarray(achieved) - np.asarray(desired), axis=-1)


class _DictObs(gym.Env):
    """Dict observations that are not a goal space."""

    def __init__(self) -> None:
        self.observation_space = gym.spaces.Dict({"position": _box(2)})
        self.action_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)


for _id, _entry in ((TINY, _TinyGoal), (DICT, _DictObs)):
    if _id not in gym.registry:
        gym.register(_id, entry_point=_entry, max_episode_steps=20)
toy_env.register()


def _tiny(tmp_path: Path, env_id: str, **kw) -> Config:
    """The shared tiny run with 256-step rollouts and 10-step segments (short goal episodes)."""
    small = dict(
        ppo=PPOConfig(num_steps=256, num_minibatches=4, update_epochs=1),
        query=QueryConfig(total_labels=8, segment_length=10),
    )
    return tiny_config(tmp_path, env_id, **(small | kw))


@pytest.mark.filterwarnings(
    "ignore:.*(different from the unwrapped|observation space (minimum|maximum) value is"
    "|symmetric and normalized space).*:UserWarning"
)
@pytest.mark.parametrize("fixed_horizon", [False, True], ids=["standard", "fixed-horizon"])
@pytest.mark.parametrize("env_id", [TINY, "PointMaze_UMaze-v3", "FetchReach-v4"])
def test_a_goal_env_as_the_app_builds_it_passes_gymnasiums_env_checker(
    env_id: str, fixed_horizon: bool
) -> None:
    """Flattened (and fixed-horizon) goal envs pass ``check_env``, whose close check rebuilds
    the stack from ``env.spec``: our wrappers record their constructor arguments (the MuJoCo
    family's stacks: tests/envs/test_tasks.py)."""
    if env_id != TINY:
        _skip_unless_runs(env_id)
    envs = make_vec_env(env_id, 1, 0, fixed_horizon=fixed_horizon)
    try:
        env = envs.envs[0]
        check_env(env, skip_render_check=True)  # "human" rendering needs a display
        assert env.spec.make().spec == env.spec
    finally:
        envs.close()


def test_the_wrapper_joins_observation_achieved_and_desired_goal_in_that_order() -> None:
    env = make_env(TINY)
    assert isinstance(env, FlatGoalObservation)
    assert env.sizes == (3, 2, 2) and env.goal_size == 2
    assert env.observation_space.shape == (7,)
    obs, info = env.reset(seed=0)
    inner = env.unwrapped
    np.testing.assert_array_equal(obs, [*inner.pos, 7.0, *inner.pos, *inner.goal])
    assert info[SUCCESS] is False
    # Steer straight at the goal: success is reported under the name every goal env gets.
    for _ in range(20):
        obs, _, _, _, info = env.step(np.clip((inner.goal - inner.pos) / 0.2, -1, 1))
    assert info[SUCCESS] is True and info["success"] is True
    np.testing.assert_array_equal(obs[-2:], inner.goal)
    info = describe_env(TINY)
    assert (info.obs_dim, info.goal_size) == (7, 2)
    assert describe_env(toy_env.ENV_ID).goal_size == 0


def test_dict_observations_that_are_not_a_goal_space_are_refused_in_one_line(
    tmp_path: Path,
) -> None:
    with pytest.raises(ConfigError) as err:
        preflight(_tiny(tmp_path, DICT))
    message = str(err.value)
    assert "dict observations with keys ['position']" in message and "\n" not in message


@pytest.mark.parametrize("algo", ["ppo", "sac"])
def test_a_goal_env_trains_and_reports_its_success_rate(tmp_path: Path, algo: str) -> None:
    sac = SACConfig(learning_starts=100, iteration_steps=128, pretrain_steps=20, batch_size=32)
    summary = run(_tiny(tmp_path, TINY, algo=algo, sac=sac, reward_model=QUICK_REWARD_FIT))
    assert summary.status == "finished" and summary.labels_used > 0
    assert summary.final_success_rate is not None and 0.0 <= summary.final_success_rate <= 1.0
    rates = [v for _, v in tb_scalars(tmp_path / "run" / "tb", "charts/success_rate")]
    assert rates and all(0.0 <= r <= 1.0 for r in rates)
    pair = (store := LabelStore(tmp_path / "run" / "labels.sqlite")).get_pair(
        store.labels()[0].pair_id
    )
    assert pair.left.obs.shape[1] == 7  # the reward model and the teacher see flat vectors
    assert store.get_meta("task") == GOAL_TASK  # no --task: the page says what the marker is


def test_an_env_without_success_logs_no_success_rate(tmp_path: Path) -> None:
    summary = run(_tiny(tmp_path, toy_env.ENV_ID))
    assert summary.final_success_rate is None
    assert tb_scalars(tmp_path / "run" / "tb", "charts/success_rate") == []


def _skip_unless_runs(env_id: str) -> None:
    problem = goal_env_problem(env_id)
    if problem:
        pytest.skip(problem)


@pytest.mark.parametrize("env_id", ["PointMaze_UMaze-v3", "FetchReach-v4"])
def test_a_frame_draws_the_segments_own_desired_goal(env_id: str) -> None:
    """Two segments with the same physics states and different desired goals: their frames
    differ (the goal marker is not physics state; without the render hook both would show the
    renderer's own goal), and the same goal draws the same frame again."""
    _skip_unless_runs(env_id)
    env = make_env(env_id)
    obs, _ = env.reset(seed=3)
    data = mujoco_sim(env).data
    qpos, qvel = data.qpos[None].copy(), data.qvel[None].copy()
    renderer = make_renderer(env_id, VideoConfig(width=64, height=64))
    try:

        def frames(goal_shift: float) -> np.ndarray:
            shown = obs[None].copy()
            shown[:, -renderer.goal_size :] += goal_shift
            segment = Segment(
                obs=shown.astype(np.float32),
                actions=np.zeros((1, env.action_space.shape[0]), np.float32),
                true_rewards=np.zeros(1, np.float32),
                qpos=qpos,
                qvel=qvel,
                env_id=env_id,
            )
            return segment_frames(renderer, segment)

        here, moved, again = frames(0.0), frames(0.15), frames(0.0)
    finally:
        renderer.close()
        env.close()
    assert np.abs(here.astype(int) - moved).max() > 50  # the marker moved
    np.testing.assert_array_equal(here, again)


def test_pointmaze_trains_cuts_segments_and_renders_a_clip(tmp_path: Path) -> None:
    _skip_unless_runs("PointMaze_UMaze-v3")
    cfg = _tiny(tmp_path, "PointMaze_UMaze-v3", query=QueryConfig(total_labels=8))
    summary = run(cfg)
    assert summary.status == "finished" and summary.labels_used > 0
    store = LabelStore(tmp_path / "run" / "labels.sqlite")
    pair = store.get_pair(store.labels()[0].pair_id)
    assert pair.left.obs.shape[1] == 4 + 2 + 2
    video = render_pair_video(pair, tmp_path / "clip.mp4", VideoConfig(width=32, height=32))
    reader = imageio_ffmpeg.read_frames(str(video))
    meta = next(reader)
    frames = [np.frombuffer(f, np.uint8) for f in reader]
    assert len(frames) == len(pair.left) and meta["size"][0] > 64
    assert max(f.std() for f in frames) > 5


def test_a_fresh_render_process_knows_gymnasium_robotics_ids() -> None:
    """Render workers are spawned: nothing has registered gymnasium-robotics' envs there."""
    _skip_unless_runs("PointMaze_UMaze-v3")
    code = (
        "from rlhf.config import VideoConfig; from rlhf.render.frames import make_renderer; "
        "r = make_renderer('PointMaze_UMaze-v3', VideoConfig(width=32, height=32)); "
        "print(r.goal_size); r.close()"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr[-500:]
    assert done.stdout.strip() == "2"


def test_fetch_on_mujoco_4_is_refused_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """gymnasium-robotics' Fetch fails on mujoco 4 in an assertion deep in its reset."""
    pytest.importorskip("gymnasium_robotics")
    import mujoco

    monkeypatch.setattr(mujoco, "__version__", "4.0.0")
    with pytest.raises(ConfigError) as err:
        preflight(_tiny(tmp_path, "FetchReach-v4"))
    assert "FetchReach-v4 needs mujoco < 3.4" in str(err.value) and "\n" not in str(err.value)


def test_success_rates_survive_a_checkpoint_and_old_checkpoints_have_none() -> None:
    from rlhf.run.lifecycle import Progress

    progress = Progress()
    progress.recent_successes.extend([1.0, 0.0, 1.0, 1.0])
    restored = Progress.from_state_dict(progress.state_dict())
    assert restored.success_rate == 0.75
    old = progress.state_dict()
    del old["recent_successes"]  # written before success rates were kept
    assert Progress.from_state_dict(old).success_rate is None


@pytest.mark.parametrize("mujoco", ["4.0.0", "3.17.0"])  # both fail Fetch; 3.3.7 runs it
def test_fetch_on_a_newer_mujoco_is_a_one_line_problem(
    monkeypatch: pytest.MonkeyPatch, mujoco: str
) -> None:
    versions = {"mujoco": mujoco, "gymnasium-robotics": "1.4.2"}
    monkeypatch.setattr(goals, "version", versions.__getitem__)
    release = tuple(int(p) for p in mujoco.split(".")[:2])
    monkeypatch.setattr(goals, "mujoco_release", lambda: release)
    assert goal_env_problem("FetchReach-v4") == (
        f"FetchReach-v4 needs mujoco < 3.4 (gymnasium-robotics 1.4.2 fails on mujoco {mujoco});"
        f" the goals extra pins mujoco < 3.4: {install_extra('goals')}"
    )
    assert goal_env_problem("PointMaze_UMaze-v3") is None  # PointMaze runs on mujoco 4


def test_a_missing_goals_extra_is_a_one_line_problem(monkeypatch: pytest.MonkeyPatch) -> None:
    def missing(name: str) -> str:
        raise PackageNotFoundError(name)

    monkeypatch.setattr(goals, "version", missing)
    assert goal_env_problem("PointMaze_UMaze-v3") == (
        f"PointMaze_UMaze-v3 needs the goals extra (gymnasium-robotics): {install_extra('goals')}"
    )
