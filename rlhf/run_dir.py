"""The run directory layout: ``runs/<run-name>/{config.json, tb/, labels.sqlite, videos/, checkpoints/}``."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path

from rlhf.config import Config, ConfigError


@dataclass(frozen=True)
class RunDir:
    """Paths of one run."""

    root: Path

    @property
    def config(self) -> Path:
        return self.root / "config.json"

    @property
    def tb(self) -> Path:
        return self.root / "tb"

    @property
    def labels(self) -> Path:
        return self.root / "labels.sqlite"

    @property
    def videos(self) -> Path:
        return self.root / "videos"

    @property
    def checkpoints(self) -> Path:
        return self.root / "checkpoints"

    @property
    def summary(self) -> Path:
        return self.root / "summary.json"

    @property
    def name(self) -> str:
        return self.root.name


def default_run_name(cfg: Config) -> str:
    source = "env" if cfg.reward == "env" else cfg.feedback
    return f"{cfg.env_id}__{source}__{cfg.seed}__{time.strftime('%Y%m%d-%H%M%S')}"


def create_run_dir(cfg: Config) -> RunDir:
    """Make a fresh run directory and write ``config.json``; refuses to overwrite a finished run."""
    run = RunDir(Path(cfg.runs_dir) / (cfg.run_name or default_run_name(cfg)))
    if run.config.exists():
        raise ConfigError(f"run directory {run.root} already exists; choose another --run-name")
    for path in (run.root, run.tb, run.videos, run.checkpoints):
        path.mkdir(parents=True, exist_ok=True)
    run.config.write_text(json.dumps(cfg.to_dict(), indent=2, default=str) + "\n")
    return run


def open_run_dir(path: str | Path) -> RunDir:
    """An existing run directory (for ``rlhf serve``); one-line error if it is not one."""
    run = RunDir(Path(path))
    if not run.labels.exists():
        raise ConfigError(f"{run.root} is not a run directory (no labels.sqlite in it)")
    return run
