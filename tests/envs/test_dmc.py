"""DeepMind Control's suite through shimmy: flat observations, recorded physics state, clips drawn
from it that equal the live frames, PPO and SAC runs that cut segments, and a one-line refusal
without the dmc extra (or on mujoco 4, which dm-control fails on).

The refusals run everywhere (the missing extra is simulated); the rest needs the dmc extra
(``scripts/setup.sh dmc``) and skips with the reason otherwise."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import gymnasium as gym
import imageio_ffmpeg
import numpy as np
import pytest

from rlhf.cli import main
from rlhf.config import ConfigError, QueryConfig, SACConfig, VideoConfig
from rlhf.core.shell import install_extra
from rlhf.envs import StateKind, describe_env, dmc, make_env
from rlhf.envs.goals import mujoco_release
from rlhf.envs.state import mujoco_data
from rlhf.render.cameras import dmc_camera
from rlhf.render.video import make_renderer, render_pair_video
from rlhf.run.preflight import preflight
from rlhf.run.runner import run
from rlhf.store import LabelStore
from tests.support.helpers import tiny_config

WALKER = "dm_control/walker-walk-v0"
CFG = VideoConfig(width=96, height=64)  # not square, so a swapped width/height shows up


def _skip_unless_installed() -> None:
    """Skip without the dmc extra; fail where it must be there (scripts/test.sh runs this file in
    its dmc venv with RLHF_REQUIRE_DMC=1, so a broken install cannot pass as skipped)."""
    problem = dmc.dmc_problem(WALKER, mujoco_release())
    if problem and os.environ.get("RLHF_REQUIRE_DMC"):
        pytest.fail(problem)
    if problem:
        pytest.skip(problem)


def _without_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make this process look like one without shimmy (the dmc extra not installed)."""
    find_spec = dmc.importlib.util.find_spec
    monkeypatch.setattr(
        dmc.importlib.util, "find_spec", lambda name: None if name == "shimmy" else find_spec(name)
    )


def test_a_missing_dmc_extra_is_one_line_exit_2_and_leaves_nothing(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _without_extra(monkeypatch)
    with pytest.raises(SystemExit) as exit_:
        main(["train", "--env-id", WALKER, "--runs-dir", str(tmp_path), "--no-progress"])
    err = capsys.readouterr().err
    assert exit_.value.code == 2, err
    assert err.strip() == (
        f"rlhf: error: {WALKER} needs the dmc extra (shimmy, dm-control): {install_extra('dmc')}"
    )
    assert os.listdir(tmp_path) == []


def test_dmc_on_mujoco_4_and_ids_outside_the_suite_are_one_line_problems(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(dmc.importlib.util, "find_spec", lambda name: object())  # installed
    monkeypatch.setattr(dmc, "version", {"mujoco": "4.0.0", "dm-control": "1.0.50"}.__getitem__)
    assert dmc.dmc_problem(WALKER, (4, 0)) == (
        f"{WALKER} needs mujoco < 4 (dm-control 1.0.50 fails on mujoco 4.0.0); the dmc extra"
        f" pins mujoco < 4: {install_extra('dmc')}"
    )
    assert dmc.dmc_problem(WALKER, (3, 17)) is None
    problem = dmc.dmc_problem("dm_control/CmuHumanoidRunWalls-v0", (3, 17))
    assert problem and "not a task of DeepMind Control's suite" in problem


@pytest.mark.parametrize(
    ("env_id", "obs_dim", "act_dim", "nq", "nv", "dt"),
    [
        (WALKER, 24, 6, 9, 9, 0.025),
        ("dm_control/cheetah-run-v0", 17, 6, 9, 9, 0.01),
        ("dm_control/quadruped-walk-v0", 78, 12, 23, 22, 0.02),
    ],
)
def test_a_suite_task_starts_with_flat_observations_and_its_physics_state(
    env_id: str, obs_dim: int, act_dim: int, nq: int, nv: int, dt: float
) -> None:
    _skip_unless_installed()
    info = describe_env(env_id)
    assert (info.obs_dim, info.act_dim, info.nq, info.nv) == (obs_dim, act_dim, nq, nv)
    assert info.state is StateKind.MUJOCO and info.render_problem is None
    assert info.max_episode_steps == 1000 and info.dt == pytest.approx(dt)  # control steps


def test_a_task_that_moves_its_target_outside_the_state_refuses_clips() -> None:
    _skip_unless_installed()
    info = describe_env("dm_control/reacher-easy-v0")
    assert info.render_problem and "its clips cannot be drawn" in info.render_problem
    with pytest.raises(ConfigError) as err:  # a person would label clips of the wrong target
        preflight(tiny_config(Path("/nonexistent"), "dm_control/reacher-easy-v0", feedback="human"))
    assert "use --feedback synthetic" in str(err.value) and "\n" not in str(err.value)


def test_replayed_pairs_are_refused_in_one_line() -> None:
    """They set a state through gymnasium's set_state, which dm_control's env does not have: the
    run used to stop at its first replay with a traceback."""
    _skip_unless_installed()
    cfg = tiny_config(Path("/nonexistent"), WALKER, query=QueryConfig(replay_share=0.3))
    with pytest.raises(ConfigError) as err:
        preflight(cfg)
    assert str(err.value) == (
        "--query.replay-share needs a gymnasium MuJoCo env (its state is set to replay);"
        f" {WALKER} is DeepMind Control's"
    )


@pytest.mark.parametrize(
    "env_id", [WALKER, "dm_control/cheetah-run-v0", "dm_control/quadruped-walk-v0"]
)
def test_a_clip_drawn_from_recorded_state_equals_the_live_frames(env_id: str) -> None:
    """The live env draws each frame after its step with dm_control's own renderer, through the
    same camera and flags; the clip is drawn later from the recorded qpos/qvel alone."""
    _skip_unless_installed()
    env = make_env(env_id)
    env.reset(seed=3)
    env.action_space.seed(3)
    physics = env.unwrapped.physics
    physics.model.vis.quality.offsamples = 4 if CFG.antialias else 0  # as DmcRenderer sets it
    camera = dmc_camera(dmc.suite_task(env_id)[0])
    flags = {"shadow": False, "reflection": False}
    qpos, qvel, live = [], [], []
    for _ in range(8):
        env.step(env.action_space.sample())
        data = mujoco_data(env)
        qpos.append(np.array(data.qpos))
        qvel.append(np.array(data.qvel))
        live.append(
            physics.render(CFG.height, CFG.width, camera_id=camera, render_flag_overrides=flags)
        )
    env.close()
    renderer = make_renderer(env_id, CFG)
    try:
        drawn = renderer.render(np.array(qpos), np.array(qvel))
        again = renderer.render(np.array(qpos[::-1]), np.array(qvel[::-1]))[::-1]
    finally:
        renderer.close()
    assert drawn.shape == (8, CFG.height, CFG.width, 3) and drawn.std() > 5
    np.testing.assert_array_equal(drawn, np.array(live))
    np.testing.assert_array_equal(again, drawn)  # a frame depends on its state alone


@pytest.mark.parametrize("algo", ["ppo", "sac"])
def test_a_suite_task_trains_cuts_segments_and_renders_a_clip(tmp_path: Path, algo: str) -> None:
    _skip_unless_installed()
    sac = SACConfig(learning_starts=100, iteration_steps=128, pretrain_steps=20, batch_size=32)
    cfg = tiny_config(
        tmp_path, WALKER, algo=algo, sac=sac, query=QueryConfig(total_labels=8, segment_length=20)
    )
    summary = run(cfg)
    assert summary.status == "finished" and summary.labels_used > 0
    store = LabelStore(tmp_path / "run" / "labels.sqlite")
    pair = store.get_pair(store.labels()[0].pair_id)
    assert pair.left.obs.shape == (20, 24) and pair.left.qpos.shape == (20, 9)
    video = render_pair_video(pair, tmp_path / "clip.mp4", VideoConfig(width=32, height=32))
    reader = imageio_ffmpeg.read_frames(str(video))
    next(reader)
    frames = [np.frombuffer(f, np.uint8) for f in reader]
    assert len(frames) == len(pair.left) and max(f.std() for f in frames) > 5


def test_a_fresh_render_process_knows_dm_control_ids() -> None:
    """Render workers are spawned: nothing has registered shimmy's envs there."""
    _skip_unless_installed()
    code = (
        "from rlhf.config import VideoConfig; from rlhf.render.frames import make_renderer; "
        f"r = make_renderer({WALKER!r}, VideoConfig(width=32, height=32)); print(r.fps); r.close()"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr[-500:]
    assert float(done.stdout.strip()) == pytest.approx(40.0)  # real time: 1 / 0.025 s


def test_the_suite_ids_are_registered_once_the_extra_is_there() -> None:
    _skip_unless_installed()
    dmc.register_dmc()
    assert {WALKER, "dm_control/cheetah-run-v0", "dm_control/quadruped-walk-v0"} <= set(
        gym.registry
    )
