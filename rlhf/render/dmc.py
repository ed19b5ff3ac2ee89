"""Frames of a DeepMind Control segment, drawn from its recorded state with dm_control's renderer.

dm_control owns its physics and draws with its own GL context (``physics.render``), so this is
not :class:`rlhf.render.frames.SegmentRenderer` (which drives gymnasium's viewer): set qpos and
qvel, ``mj_forward``, render through a camera of the model (:func:`rlhf.render.cameras.dmc_camera`).
The suite's cameras either stay put or follow the robot's centre of mass with a fixed offset,
so a frame depends on the state alone, and equals the frame the live env draws after a step
(dm_control's step leaves the kinematics up to date).
"""

from __future__ import annotations

import contextlib
from typing import Any

import numpy as np

from rlhf.config import VideoConfig
from rlhf.envs.dmc import clip_problem, suite_task
from rlhf.render.base import RenderError, check_state, make_env_for_render
from rlhf.render.cameras import dmc_camera


class DmcRenderer:
    """Draws frames of one DeepMind Control suite task from recorded (qpos, qvel).

    Args:
        env_id: ``dm_control/<domain>-<task>-v0``.
        cfg: frame size, shadow/reflection/antialiasing switches and frame rate.
        kwargs: the env's keyword arguments (the same model as the run's).
    """

    goal_size = 0

    def __init__(self, env_id: str, cfg: VideoConfig, kwargs: dict[str, Any] | None = None) -> None:
        problem = clip_problem(env_id)
        if problem:
            raise RenderError(problem)
        self.env_id = env_id
        self.cfg = cfg
        self._env = make_env_for_render(env_id, kwargs)
        self._physics = self._env.unwrapped.physics
        self._dt = float(self._env.unwrapped.control_timestep())
        self.camera = dmc_camera(suite_task(env_id)[0])
        model = self._physics.model
        # Read when dm_control makes its GL context, at the first render: multisampling
        # triples a frame's time on software GL, and the offscreen buffer (the model's
        # offwidth x offheight, 640 x 480 in the suite) must hold the clip's frame.
        model.vis.quality.offsamples = 4 if cfg.antialias else 0
        model.vis.global_.offwidth = max(int(model.vis.global_.offwidth), cfg.width)
        model.vis.global_.offheight = max(int(model.vis.global_.offheight), cfg.height)
        # Shadow maps and the reflection pass cost ~10x on software GL.
        self.flags = {"shadow": bool(cfg.shadows), "reflection": bool(cfg.reflections)}

    @property
    def fps(self) -> float:
        """Frames per second of the video: ``cfg.fps``, or real time (1 / control timestep)."""
        return float(self.cfg.fps) if self.cfg.fps is not None else 1.0 / self._dt

    def render(
        self, qpos: np.ndarray, qvel: np.ndarray, goals: np.ndarray | None = None
    ) -> np.ndarray:
        """Frames for the states ``(qpos[t], qvel[t])``: (T, H, W, 3) uint8.

        Raises:
            RenderError: the arrays do not fit the model, or the renderer is closed.
        """
        import mujoco  # lazily: MUJOCO_GL must be settled before mujoco picks its GL backend

        if self._physics is None:
            raise RenderError(f"the {self.env_id} renderer is closed")
        physics = self._physics
        model, data = physics.model.ptr, physics.data.ptr
        qpos, qvel = check_state(self.env_id, qpos, qvel, model.nq, model.nv)
        frames = np.empty((len(qpos), self.cfg.height, self.cfg.width, 3), dtype=np.uint8)
        # A clean MjData, so nothing but qpos/qvel (time, controls, activations) carries over
        # from whatever was rendered before.
        mujoco.mj_resetData(model, data)
        for t in range(len(qpos)):
            data.qpos[:] = qpos[t]
            data.qvel[:] = qvel[t]
            mujoco.mj_forward(model, data)
            frames[t] = physics.render(
                self.cfg.height,
                self.cfg.width,
                camera_id=self.camera,
                render_flag_overrides=self.flags,
            )
        return frames

    def close(self) -> None:
        """Free dm_control's GL context and the env (idempotent)."""
        if self._physics is None:
            return
        self._physics = None
        with contextlib.suppress(Exception):  # at exit EGL may already be torn down
            self._env.close()
