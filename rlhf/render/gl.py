"""Which MuJoCo GL backend a headless render process uses: EGL, else OSMesa, probed in a fresh
process each (PyOpenGL fixes its platform at first import)."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from collections.abc import Callable, Mapping

log = logging.getLogger(__name__)

_PROBE = (
    "from mujoco.{name} import GLContext\nctx = GLContext(16, 16)\nctx.make_current()\nctx.free()\n"
)


def probe_gl_backend(name: str, timeout: float = 60.0) -> str | None:
    """Try to make a GL context with backend ``name`` in a fresh process; None if it works.

    A fresh process, because PyOpenGL fixes its platform at first import: after a failed EGL
    attempt this process could no longer switch to OSMesa.

    Returns:
        None on success, else the last line of the error.
    """
    env = {**os.environ, "MUJOCO_GL": name, "PYOPENGL_PLATFORM": name}
    try:
        result = subprocess.run(
            [sys.executable, "-c", _PROBE.format(name=name)],
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"{type(exc).__name__}: {exc}"
    if result.returncode == 0:
        return None
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    return lines[-1] if lines else f"exit status {result.returncode}"


def select_gl_backend(
    environ: Mapping[str, str], probe: Callable[[str], str | None] = probe_gl_backend
) -> tuple[str | None, str]:
    """Choose the MuJoCo GL backend for a headless worker: EGL, else OSMesa.

    Returns:
        (backend to set as MUJOCO_GL, or None to leave the environment alone; a note for humans).
    """
    if environ.get("MUJOCO_GL"):
        return None, f"MUJOCO_GL={environ['MUJOCO_GL']} (given)"
    if environ.get("DISPLAY"):
        return None, "MUJOCO_GL unset with a DISPLAY: gymnasium picks glfw, egl or osmesa"
    egl_error = probe("egl")
    if egl_error is None:
        return "egl", "MUJOCO_GL=egl (no DISPLAY)"
    osmesa_error = probe("osmesa")
    if osmesa_error is None:
        return "osmesa", f"MUJOCO_GL=osmesa: EGL failed ({egl_error})"
    return "egl", f"no working GL backend: egl: {egl_error}; osmesa: {osmesa_error}"


def _settle_gl_backend() -> str:
    backend, note = select_gl_backend(os.environ)
    if backend is not None:
        os.environ["MUJOCO_GL"] = backend
        if backend == "osmesa":
            os.environ["PYOPENGL_PLATFORM"] = "osmesa"
    if backend == "osmesa" or note.startswith("no working"):
        log.warning("render worker: %s", note)
    return note
