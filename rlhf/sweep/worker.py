"""One cell, in a Ray worker: skipped when finished, resumed from its checkpoint, or started.

The same :func:`plan` runs in the driver (to count the finished cells before Ray starts) and in
the worker (so that Ray's rerun of a cell whose worker died resumes from its checkpoint).
"""

from __future__ import annotations

import contextlib
import enum
import importlib
import json
import os
import shutil
import sys
from collections.abc import Iterable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from rlhf.config import Config, ConfigError
from rlhf.config.paths import get, leaf_paths
from rlhf.config.presets import with_preset
from rlhf.run.run_dir import (
    RAISE_ONLY,
    SESSION_ONLY,
    auto_as_stored,
    read_config,
    resumed_config,
    rises,
)
from rlhf.sweep.grid import Cell, shown
from rlhf.sweep.spec import RESERVED, SpecError, key_name

LAST_CHECKPOINT = "last.pt"
"""rlhf.run.trainer's checkpoint name; repeated so the driver plans without importing torch's side."""


@dataclass(frozen=True)
class CellResult:
    """What the results table shows of one cell (from its summary.json and TensorBoard)."""

    name: str
    params: tuple[tuple[str, Any], ...]
    status: str
    """finished, interrupted, crashed (the run's own summary) or failed (it never got that far)."""
    final_true_return: float | None = None
    labels_used: int | None = None
    reward_val_accuracy: float | None = None
    sps: float | None = None
    wall_seconds: float | None = None
    env_steps: int | None = None
    sessions: int | None = None
    error: str | None = None
    curve: tuple[tuple[int, float], ...] = ()
    """(env step, true episodic return) of every episode, from ``charts/episodic_return``."""
    ran: bool = True
    """False when the cell was found finished and not run again."""

    @property
    def ok(self) -> bool:
        return self.status == "finished" and self.error is None


class Action(enum.Enum):
    SKIP = "skip"
    RESUME = "resume"
    FRESH = "fresh"


def plan(cell: Cell) -> tuple[Action, Config]:
    """What a (re)run does with ``cell``, and the configuration it runs with.

    Raises:
        SpecError: the cell's directory was run with settings the spec no longer has.
    """
    root = cell.root
    if not (root / "checkpoints" / LAST_CHECKPOINT).is_file():
        return Action.FRESH, cell.config
    # The stored config holds per-env settings as resolved (rlhf.config.presets); so must the spec's.
    spec, _ = with_preset(cell.config)
    try:
        stored = read_config(root)
    except ConfigError as exc:
        raise SpecError(f"cell {cell.name}: {exc}") from None
    spec = auto_as_stored(stored, spec)  # auto: what the cell resolved it to when it started
    for path in leaf_paths(Config):
        old, new = get(stored, path), get(spec, path)
        free = path in SESSION_ONLY or path in RESERVED  # rlhf train --resume may change them
        if not (free or old == new or (path in RAISE_ONLY and rises(path, old, new))):
            raise SpecError(
                f"{root} ran with {key_name(path)} = {shown(old)} and the spec now says"
                f" {shown(new)}: put it back, or use another --sweep-dir"
            )
    try:  # a run on an earlier target catalogue (rlhf.run.run_dir)
        config = resumed_config(root, stored, replace(spec, resume=str(root)))
    except ConfigError as exc:
        raise SpecError(f"cell {cell.name}: {exc}") from None
    raised = any(get(config, p) != get(stored, p) for p in RAISE_ONLY)
    if _summary(root).get("status") == "finished" and not raised:
        return Action.SKIP, config
    return Action.RESUME, config


def run_cell(cell: Cell, setup: tuple[str, ...] = ()) -> CellResult:
    """Run (or resume, or skip) ``cell``; an error becomes the result's one-line ``error``."""
    # Headless rendering and one torch thread per cell: Ray gives each cell one CPU.
    os.environ.setdefault("MUJOCO_GL", "egl")
    from rlhf.run.lifecycle import RunInterrupted

    try:
        run_setup(setup)
        action, config = plan(cell)
        if action is Action.SKIP:
            return read_result(cell, ran=False)
        if action is Action.FRESH and cell.root.exists():
            shutil.rmtree(cell.root)  # a start that never reached its first checkpoint
        import torch

        from rlhf.run.runner import run

        torch.set_num_threads(1)
        run(config)
    except RunInterrupted:  # the sweep was stopped: the run wrote a checkpoint
        return read_result(cell)
    except Exception as exc:
        return read_result(cell, error=one_line(exc))
    return read_result(cell)


def run_setup(setup: Iterable[str]) -> None:
    """Import each ``module`` and call ``module:function`` (e.g. to register a custom env).

    Modules are found as ``python -m`` finds them: in the current directory (a local Ray's
    workers start in the sweep's), then among the installed packages.
    """
    if setup and os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    for item in setup:
        module, _, function = item.partition(":")
        loaded = importlib.import_module(module)
        if function:
            getattr(loaded, function)()


def read_result(cell: Cell, error: str | None = None, ran: bool = True) -> CellResult:
    """The cell's result from its directory; ``error`` (the exception it raised) wins over a
    summary left by an earlier session."""
    summary = _summary(cell.root)
    if error is not None and summary.get("status") != "crashed":
        summary = {}  # the run never wrote a summary of this failure
    fields = ("final_true_return", "labels_used", "reward_val_accuracy", "sps", "wall_seconds")
    return CellResult(
        name=cell.name,
        params=cell.params,
        status=summary.get("status", "failed"),
        **{k: summary.get(k) for k in (*fields, "env_steps", "sessions")},
        error=error if error is not None else summary.get("error"),
        curve=read_curve(cell.root / "tb"),
        ran=ran,
    )


def read_curve(tb_dir: Path) -> tuple[tuple[int, float], ...]:
    """(step, value) of ``charts/episodic_return`` in a run's TensorBoard directory."""
    return read_scalars(tb_dir, "charts/episodic_return")["charts/episodic_return"]


def read_scalars(tb_dir: Path, *tags: str) -> dict[str, tuple[tuple[int, float], ...]]:
    """(step, value) of each of ``tags`` in a run's TensorBoard directory, read once (empty for
    a tag it does not have)."""
    if not tb_dir.is_dir():
        return dict.fromkeys(tags, ())
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(tb_dir), size_guidance={"scalars": 0})
    events.Reload()
    have = events.Tags().get("scalars", [])
    return {
        tag: tuple((e.step, e.value) for e in events.Scalars(tag)) if tag in have else ()
        for tag in tags
    }


def one_line(exc: BaseException, limit: int = 300) -> str:
    """``Type: message`` on one line, cut to ``limit`` characters."""
    text = " ".join(f"{type(exc).__name__}: {exc}".split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _summary(root: Path) -> dict[str, Any]:
    with contextlib.suppress(OSError, ValueError):
        data = json.loads((root / "summary.json").read_text())
        if isinstance(data, dict):
            return data
    return {}
