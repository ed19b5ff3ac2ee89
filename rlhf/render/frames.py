"""Frames of a segment, drawn from its recorded state: never by replaying actions.

* :class:`SegmentRenderer` (MuJoCo): set qpos/qvel, ``mj_forward``, render, through a camera that
  depends only on the state (:mod:`rlhf.render.cameras`), so the same state always gives the
  same picture whatever was drawn before. Replaying actions would drift into another trajectory.
  A goal-conditioned env's goal marker is not physics state: it is drawn from the env's ``goal``,
  so each frame is given the segment's own desired goal (:meth:`SegmentRenderer.render`).
* :class:`ClassicRenderer` (classic control, e.g. Pendulum): set the env's ``state`` and let the
  env draw itself with ``render()``.

:func:`make_renderer` picks one for an env. A renderer keeps a GL context (MuJoCo) or a drawing
surface, so it must be used in the thread (or process) that created it.
"""

from __future__ import annotations

import contextlib
import os
from typing import Any, Protocol

import numpy as np

from rlhf.config import VideoConfig
from rlhf.envs import StateKind, goal_size
from rlhf.envs.dmc import is_dmc
from rlhf.envs.state import mujoco_sim, state_kind
from rlhf.render.base import RenderError, check_state, make_env_for_render
from rlhf.render.cameras import Camera, camera_for

TRACK_CAMERA = "track"
"""Gymnasium's MuJoCo models name their body-following camera ``track``."""


class Renderer(Protocol):
    """Draws the frames of one env from recorded states."""

    @property
    def fps(self) -> float: ...

    goal_size: int
    """Size of the desired goal at the end of each observation (0: not a goal env)."""

    def render(
        self, qpos: np.ndarray, qvel: np.ndarray, goals: np.ndarray | None = None
    ) -> np.ndarray: ...

    def close(self) -> None: ...


def _mujoco():
    # Imported lazily: MUJOCO_GL must be settled before mujoco picks its GL backend.
    import mujoco

    return mujoco


def make_renderer(env_id: str, cfg: VideoConfig, kwargs: dict[str, Any] | None = None) -> Renderer:
    """The renderer for ``env_id``'s kind of state (see :mod:`rlhf.envs.state`)."""
    if is_dmc(env_id):  # dm_control draws with its own renderer, not gymnasium's viewer
        from rlhf.render.dmc import DmcRenderer

        return DmcRenderer(env_id, cfg, kwargs)
    probe = make_env_for_render(env_id, kwargs)
    try:
        probe.reset(seed=0)
        kind = state_kind(probe)
    finally:
        probe.close()
    if kind is StateKind.MUJOCO:
        return SegmentRenderer(env_id, cfg, kwargs)
    if kind is StateKind.CLASSIC:
        return ClassicRenderer(env_id, cfg, kwargs)
    raise RenderError(f"{env_id} has no state that can be replayed to draw its clips")


class SegmentRenderer:
    """Draws frames of one MuJoCo environment from recorded (qpos, qvel).

    Args:
        env_id: gymnasium id of a MuJoCo environment.
        cfg: frame size, shadow/reflection switches and frame rate.
        kwargs: the env's keyword arguments (the same model as the run's).
    """

    def __init__(self, env_id: str, cfg: VideoConfig, kwargs: dict[str, Any] | None = None) -> None:
        self.env_id = env_id
        self.cfg = cfg
        self.camera = camera_for(env_id)
        extra = {"camera_name": TRACK_CAMERA} if self.camera.model_track else {}
        try:
            env = make_env_for_render(
                env_id, kwargs, render_mode="rgb_array", width=cfg.width, height=cfg.height, **extra
            )
        except (TypeError, ValueError) as exc:  # not MuJoCo, or no camera of that name
            if extra:
                env = make_env_for_render(
                    env_id, kwargs, render_mode="rgb_array", width=cfg.width, height=cfg.height
                )
            else:
                raise RenderError(f"{env_id} is not a MuJoCo environment ({exc})") from exc
        self._env = env
        # What draws (Fetch's render() first puts its goal marker in place) and, for envs
        # that hold their robot env (the mazes), the MuJoCo env that owns model and viewer.
        self._sim = env.unwrapped
        self._mj = mujoco_sim(env)
        if not hasattr(self._mj, "mujoco_renderer"):
            env.close()
            raise RenderError(f"{env_id} is not a MuJoCo environment")
        self.goal_size = goal_size(env.observation_space)
        if self.goal_size:  # Fetch draws its goal marker in render(): it needs a goal first
            env.reset(seed=0)
        self.model = self._mj.model
        self.data = self._mj.data
        self.has_track_camera = self._mj.mujoco_renderer.camera_id not in (-1, None)
        self._configure_viewer()

    @property
    def fps(self) -> float:
        """Frames per second of the video: ``cfg.fps``, or real time (1 / env dt)."""
        return float(self.cfg.fps) if self.cfg.fps is not None else 1.0 / float(self._mj.dt)

    def _configure_viewer(self) -> None:
        mujoco = _mujoco()
        # Multisampling triples the time of a frame on software GL (llvmpipe); the context
        # reads this when it is made, just below.
        self.model.vis.quality.offsamples = 4 if self.cfg.antialias else 0
        self._sim.render()  # creates the offscreen viewer (and its GL context) here
        viewer = self._viewer = self._mj.mujoco_renderer.viewer
        flags = viewer.scn.flags
        # Shadow maps and the reflection pass cost ~10x on software GL; mjv_updateScene keeps
        # these scene flags, so setting them once is enough.
        flags[mujoco.mjtRndFlag.mjRND_SHADOW] = int(self.cfg.shadows)
        flags[mujoco.mjtRndFlag.mjRND_REFLECTION] = int(self.cfg.reflections)
        if not self.has_track_camera:
            set_camera(viewer.cam, self.model, self.camera)

    def render(
        self, qpos: np.ndarray, qvel: np.ndarray, goals: np.ndarray | None = None
    ) -> np.ndarray:
        """Frames for the states ``(qpos[t], qvel[t])``: (T, H, W, 3) uint8; ``goals[t]``
        (goal envs) is the desired goal whose marker frame t shows.

        Raises:
            RenderError: the arrays do not fit the model.
        """
        mujoco = _mujoco()
        if self._viewer is None:
            raise RenderError(f"the {self.env_id} renderer is closed")
        qpos, qvel = check_state(self.env_id, qpos, qvel, self.model.nq, self.model.nv)
        frames = np.empty((len(qpos), self.cfg.height, self.cfg.width, 3), dtype=np.uint8)
        # Start from a clean MjData so nothing but qpos/qvel (time, ctrl, warm starts) carries
        # over from whatever was rendered before.
        mujoco.mj_resetData(self.model, self.data)
        # Several renderers can live in one thread; each draws with its own GL context.
        self._viewer.make_context_current()
        for t in range(len(qpos)):
            self.data.qpos[:] = qpos[t]
            self.data.qvel[:] = qvel[t]
            if goals is not None:
                self._set_goal(goals[t])
            mujoco.mj_forward(self.model, self.data)
            frames[t] = self._sim.render()
        return frames

    def _set_goal(self, goal: np.ndarray) -> None:
        """Put the goal marker where ``goal`` is: the env's ``goal``, then its target site
        (the mazes move it in ``update_target_site_pos``; Fetch moves it in ``render``)."""
        self._sim.goal = np.array(goal, dtype=np.float64)
        update = getattr(self._sim, "update_target_site_pos", None)
        if update is not None:
            update()

    def close(self) -> None:
        """Release the GL objects, the GL context and the env (idempotent).

        MuJoCo frees a render context's GL objects in whichever GL context is current, and GL
        object ids are per context: freed later by the garbage collector, with another
        renderer's context current, they would delete *that* renderer's framebuffers (it then
        draws black). So free them here, with our own context current.
        """
        viewer = getattr(self, "_viewer", None)
        if viewer is None:
            return
        self._viewer = None
        viewer.make_context_current()
        viewer.con.free()
        self._env.close()

    def __del__(self) -> None:
        # At interpreter exit EGL may already be torn down; nothing is left to protect then.
        with contextlib.suppress(Exception):
            self.close()


def set_camera(cam: Any, model: Any, camera: Camera) -> None:
    """Point ``cam`` as ``camera`` says: tracking a body, or fixed.

    Gymnasium aims its free camera at the median geom position *when the viewer is created*,
    which makes frames depend on the first state rendered; everything here comes from the
    compiled model and the camera table, never from run time.
    """
    mujoco = _mujoco()
    cam.fixedcamid = -1
    if camera.track_body is not None:
        cam.type = mujoco.mjtCamera.mjCAMERA_TRACKING
        cam.trackbodyid = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, camera.track_body)
    else:
        cam.type = mujoco.mjtCamera.mjCAMERA_FREE
        cam.trackbodyid = -1
        cam.lookat[:] = model.stat.center if camera.lookat is None else camera.lookat
    cam.distance = 1.2 * float(model.stat.extent) if camera.distance is None else camera.distance
    vis = model.vis.global_
    cam.azimuth = float(vis.azimuth) if camera.azimuth is None else camera.azimuth
    cam.elevation = float(vis.elevation) if camera.elevation is None else camera.elevation


_QUIET_PYGAME = {
    "PYGAME_HIDE_SUPPORT_PROMPT": "1",
    "SDL_VIDEODRIVER": "dummy",
    "SDL_AUDIODRIVER": "dummy",
}


class ClassicRenderer:
    """Draws frames of a classic-control env (e.g. Pendulum) by setting its ``state``.

    The env draws itself (with pygame); frames are resized to the configured clip size.
    """

    def __init__(self, env_id: str, cfg: VideoConfig, kwargs: dict[str, Any] | None = None) -> None:
        self.env_id = env_id
        self.cfg = cfg
        # pygame prints a banner on import, and SDL complains on stderr when it finds no display
        # or sound device; frames are drawn off screen, so neither is needed.
        for name, value in _QUIET_PYGAME.items():
            os.environ.setdefault(name, value)
        try:
            self._env = make_env_for_render(env_id, kwargs, render_mode="rgb_array")
            self._env.reset(seed=0)
        except Exception as exc:  # e.g. pygame missing
            raise RenderError(f"{env_id} cannot draw frames ({type(exc).__name__}: {exc})") from exc
        self._sim = self._env.unwrapped
        self._size = int(np.asarray(self._sim.state).shape[0])
        dt = getattr(self._sim, "dt", None)
        self._fps = 1.0 / dt if dt else float(self._env.metadata.get("render_fps", 30))

    @property
    def fps(self) -> float:
        return float(self.cfg.fps) if self.cfg.fps is not None else self._fps

    goal_size = 0

    def render(
        self, qpos: np.ndarray, qvel: np.ndarray, goals: np.ndarray | None = None
    ) -> np.ndarray:
        qpos, _ = check_state(self.env_id, qpos, np.zeros((len(qpos), 0)), self._size, 0)
        frames = np.empty((len(qpos), self.cfg.height, self.cfg.width, 3), dtype=np.uint8)
        for t, state in enumerate(qpos):
            self._sim.state = state.copy()
            frames[t] = _resize(np.asarray(self._env.render()), self.cfg.height, self.cfg.width)
        return frames

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self._env.close()


def _resize(frame: np.ndarray, height: int, width: int) -> np.ndarray:
    """Nearest-neighbour resize of an (H, W, 3) frame (classic-control frames are flat shapes)."""
    rows = np.minimum((np.arange(height) + 0.5) * frame.shape[0] / height, frame.shape[0] - 1)
    cols = np.minimum((np.arange(width) + 0.5) * frame.shape[1] / width, frame.shape[1] - 1)
    return frame[rows.astype(int)][:, cols.astype(int), :3]
