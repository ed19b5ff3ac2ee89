"""A spec's cells: one ``rlhf train`` configuration per combination, named after its settings.

A cell's directory name depends only on its own settings (never on the other cells or the order
of the grid), so a rerun of the same sweep finds every cell it started before.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from rlhf.config import Config, ConfigError
from rlhf.sweep.spec import Spec, SpecError, key_name, nested

_UNSAFE = re.compile(r"[^A-Za-z0-9._+=-]")
_MAX_NAME = 150
"""Longest readable part of a name; file systems allow 255 bytes and the hash needs a few."""


@dataclass(frozen=True)
class Cell:
    """One run of the sweep."""

    name: str
    """Its run directory's name inside the sweep directory."""
    params: tuple[tuple[str, Any], ...]
    """(key as the user writes it, value) of each grid axis, seed last."""
    config: Config
    """The run's configuration (runs_dir is the sweep directory, run_name the cell's name)."""

    @property
    def root(self) -> Path:
        return Path(self.config.runs_dir) / self.name

    @property
    def group(self) -> tuple[tuple[str, Any], ...]:
        """The settings without the seed: the cells of one group differ only by their seed."""
        return tuple((k, v) for k, v in self.params if k != "seed")


def shown(value: Any) -> str:
    """A value as a spec would write it: 200, 0.1, inf, true, 64-64."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, tuple):
        return "-".join(map(shown, value))
    return "none" if value is None else str(value)


def cell_name(params: tuple[tuple[str, Any], ...]) -> str:
    """``key=value__key=value``; a short hash of the exact settings is appended when the
    readable part had to drop characters (e.g. the '/' of a namespaced env id) or length."""
    if not params:
        return "run"
    readable = "__".join(f"{key}={shown(value)}" for key, value in params)
    safe = _UNSAFE.sub("-", readable).replace("..", ".")
    if safe == readable and len(safe) <= _MAX_NAME:
        return safe
    exact = json.dumps([[k, repr(v)] for k, v in params]).encode()
    return f"{safe[:_MAX_NAME]}~{hashlib.sha1(exact).hexdigest()[:8]}"


def expand(spec: Spec, sweep_dir: Path) -> tuple[Cell, ...]:
    """Every combination of the grid, in order, checked as ``rlhf train`` would check it.

    Raises:
        SpecError: a cell's settings are out of range (one line naming the cell and the flag).
    """
    base: dict[str, Any] = {"feedback": "synthetic", "progress": False}
    base |= dict(spec.train)
    base |= {"runs_dir": str(sweep_dir.resolve())}
    paths = [path for path, _ in spec.grid]
    cells = []
    for values in itertools.product(*(values for _, values in spec.grid)):
        params = tuple((key_name(p), v) for p, v in zip(paths, values, strict=True))
        name = cell_name(params)
        settings = base | dict(zip(paths, values, strict=True)) | {"run_name": name}
        config = Config.from_dict(nested(settings))
        try:
            config.validate()
        except ConfigError as exc:
            raise SpecError(f"cell {name}: {exc}") from None
        cells.append(Cell(name, params, config))
    return tuple(cells)


def preflight_cells(cells: tuple[Cell, ...]) -> None:
    """Refuse, before anything runs, a cell that could never work (unknown env, bad env kwargs,
    a segment longer than an episode ...); envs are described once per distinct setting."""
    from rlhf.run.preflight import preflight

    seen: set[Config] = set()
    for cell in cells:
        key = replace(cell.config, seed=0, run_name=None)
        if key in seen:
            continue
        seen.add(key)
        try:
            preflight(cell.config)
        except ConfigError as exc:
            raise SpecError(f"cell {cell.name}: {exc}") from None
