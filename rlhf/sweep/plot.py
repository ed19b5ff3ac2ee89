"""Learning curves of a sweep: the true episodic return of each group, mean and range of seeds.

Needs matplotlib (the ``sweep`` extra: ``scripts/setup.sh sweep``); without it the plot is skipped with a note.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from rlhf.core.shell import missing_extra
from rlhf.sweep.grid import shown
from rlhf.sweep.results import groups
from rlhf.sweep.worker import CellResult

POINTS = 40
"""At most this many points per curve: each seed's episodes are averaged within each bin."""


def _binned(curve: Sequence[tuple[int, float]], edges: np.ndarray) -> np.ndarray:
    """Mean return of the episodes logged in each bin (edges[i], edges[i + 1]]; NaN if none."""
    steps, values = np.asarray(curve, dtype=float).T
    out = np.full(len(edges) - 1, np.nan)
    for i in range(len(edges) - 1):
        inside = (steps > edges[i]) & (steps <= edges[i + 1])
        if inside.any():
            out[i] = values[inside].mean()
    return out


def plot_curves(results: Sequence[CellResult], path: Path) -> str:
    """Write ``path`` (one panel per env when the env varies); returns a line saying what it did."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return f"no plot: {missing_extra('matplotlib', 'sweep')}"
    with_curves = [r for r in results if r.curve]
    if not with_curves:
        return "no plot: no cell has finished an episode yet"
    panels = sorted({dict(r.params).get("env-id", "") for r in with_curves})
    fig, axes = plt.subplots(
        1, len(panels), figsize=(6.5 * len(panels), 4.2), dpi=110, squeeze=False
    )
    # Returns are logged at iteration ends: never more bins than logged steps, or most are empty.
    logged = {step for r in with_curves for step, _ in r.curve}
    edges = np.linspace(0, max(logged), min(POINTS, len(logged)) + 1)
    grid = edges[1:]
    for params, cells in groups(with_curves):
        curves = np.array([_binned(r.curve, edges) for r in cells if r.curve])
        with warnings.catch_warnings():  # a window no seed has an episode in: a gap
            warnings.simplefilter("ignore", RuntimeWarning)
            mid = np.nanmean(curves, axis=0)
            lo, hi = np.nanmin(curves, axis=0), np.nanmax(curves, axis=0)
        label = ", ".join(f"{k}={shown(v)}" for k, v in params if k != "env-id") or "all"
        ax = axes[0][panels.index(dict(params).get("env-id", ""))]
        (line,) = ax.plot(grid, mid, label=f"{label} (n={len(curves)})")
        ax.fill_between(grid, lo, hi, color=line.get_color(), alpha=0.15)
    for ax, env in zip(axes[0], panels, strict=True):
        ax.set_title(env or "true episodic return")
        ax.set_xlabel("environment steps")
        ax.set_ylabel("true episodic return (mean, range of seeds)")
        ax.grid(alpha=0.3)
        ax.legend(loc="best", fontsize="small")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return f"plot: {path}"
