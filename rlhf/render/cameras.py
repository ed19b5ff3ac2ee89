"""How each clip frames its robot: a camera that depends only on the state being drawn.

A frame must depend on the state alone (never on what was drawn before), and the robot must stay
in the picture. Gymnasium's walkers carry a ``track`` camera that follows the body with a fixed
offset; where that camera is missing or too close, a MuJoCo *tracking* camera follows a body at a
set distance, and tasks that stay in one place get a fixed camera aimed at the task. Families of
goal-conditioned envs (gymnasium-robotics) are matched by the start of their name: the mazes
are seen from above, whole (the agent and the goal marker are never behind a wall), and the
Fetch arms from the front of their table.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Camera:
    """One way to frame a clip.

    Attributes:
        model_track: use the model's own ``track`` camera (when it has one).
        track_body: follow this body at ``distance`` (a MuJoCo tracking camera); None: fixed.
        lookat: where a fixed camera looks (None: the centre of the model).
        distance: metres from the point looked at (None: from the model's extent).
        azimuth: degrees around the vertical axis (None: the model's default).
        elevation: degrees above the horizon, negative looks down (None: the model's default).
    """

    model_track: bool = False
    track_body: str | None = None
    lookat: tuple[float, float, float] | None = None
    distance: float | None = None
    azimuth: float | None = None
    elevation: float | None = None


TRACK = Camera(model_track=True)
"""The model's ``track`` camera; a fixed view of the whole model when it has none."""

CAMERAS: dict[str, Camera] = {
    # The Ant's own track camera is close enough to cut its legs off.
    "Ant": Camera(track_body="torso", distance=5.0, elevation=-25.0, azimuth=90.0),
    # Tasks that stay put: aim at the task, close enough to see it.
    "Reacher": Camera(lookat=(0.0, 0.0, 0.0), distance=0.75, elevation=-70.0, azimuth=90.0),
    "InvertedPendulum": Camera(lookat=(0.0, 0.0, 0.35), distance=2.6, elevation=-5.0, azimuth=90.0),
    "InvertedDoublePendulum": Camera(
        lookat=(0.0, 0.0, 0.45), distance=4.2, elevation=-5.0, azimuth=90.0
    ),
}


PREFIX_CAMERAS: tuple[tuple[str, Camera], ...] = (
    # Straight down on the centre of the model: the whole maze, its walls as lines.
    ("PointMaze", Camera(elevation=-90.0, azimuth=90.0)),
    ("AntMaze", Camera(elevation=-90.0, azimuth=90.0)),
    # The table's centre (Fetch's own camera looks at the gripper, which moves).
    ("Fetch", Camera(lookat=(1.3, 0.75, 0.5), distance=1.2, azimuth=160.0, elevation=-45.0)),
)
"""Cameras for every id whose family starts with the prefix (PointMaze_UMaze, ..._Large ...)."""


def family(env_id: str) -> str:
    """``HalfCheetah-v5`` -> ``HalfCheetah`` (namespace and version dropped)."""
    return re.sub(r"-v\d+$", "", env_id.rsplit("/", 1)[-1])


def camera_for(env_id: str) -> Camera:
    name = family(env_id)
    if name in CAMERAS:
        return CAMERAS[name]
    return next((camera for prefix, camera in PREFIX_CAMERAS if name.startswith(prefix)), TRACK)


DMC_CAMERAS: dict[str, str] = {
    # The side of the robot, following its centre of mass (walker, cheetah and hopper's camera 0
    # does this already; humanoid's camera 0 looks from behind).
    "humanoid": "side",
    "humanoid_CMU": "side",
    # From the side and above, far enough for all four legs (its camera 0 is a distant
    # overview, camera 1 too close to see the legs).
    "quadruped": "y",
}
"""DeepMind Control's cameras by domain, named as the domain's model names them; a domain not
listed uses its model's camera 0, which frames the robot for the rest of the suite (a tracking
camera for the walkers, a fixed one for tasks that stay in place)."""


def dmc_camera(domain: str) -> str | int:
    """The model camera a clip of a DeepMind Control ``domain`` is drawn from."""
    return DMC_CAMERAS.get(domain, 0)
