"""The run directory layout: ``runs/<run-name>/{config.json, tb/, labels.sqlite, videos/, checkpoints/}``."""

from __future__ import annotations

import contextlib
import fcntl
import json
import math
import os
import shutil
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from rlhf.config import Config, ConfigError, check_run_name, flag
from rlhf.config.history import stored_as_it_ran
from rlhf.config.paths import get, leaf_paths
from rlhf.core.files import remove_orphan_temps, replace_atomic
from rlhf.core.shell import short_path
from rlhf.envs.targets import CATALOGUE_VERSION
from rlhf.run.config_file import (
    CONFIG_SCHEMA,
    TARGET_CATALOGUE,
    checked_config,
    config_digest,
    parse_json,
)

SESSION_ONLY = frozenset(
    {
        "progress",
        "device",
        "torch_threads",
        "feedback_wait",
        "feedback_pace",
        "video.render_processes",
        "video.ready_ahead",
        "video.ready_ahead_max",
        "video.antialias",
        "checkpoint_every",
        "checkpoint_minutes",
        "policy_clip_every",  # what is drawn for people to watch, never what is learned
        "web.host",
        "web.port",
        "web.token",
        "web.open_browser",
        "web.finish_grace",
    }
)
"""Settings that shape only the session, not the run's results: free to change on --resume."""

RAISE_ONLY = frozenset({"total_timesteps", "max_minutes", "query.total_labels"})
"""Budgets a resumed run may extend, never shrink (what was spent is spent)."""


def rises(path: str, old: Any, new: Any) -> bool:
    """Does the :data:`RAISE_ONLY` budget ``path`` grow from ``old`` to ``new``? (--max-minutes
    0 has no limit: the largest.)"""
    if path == "max_minutes":
        old, new = old or math.inf, new or math.inf
    return new > old


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
    def lock(self) -> Path:
        return self.root / ".trainer.lock"

    @property
    def name(self) -> str:
        return self.root.name


def default_run_name(cfg: Config) -> str:
    # A namespaced env id ("ns/Name-v0") must not become a subdirectory.
    env = cfg.env_id.replace("/", "-").replace("\\", "-")
    source = "env" if cfg.reward == "env" else cfg.feedback
    return f"{env}__{source}__{cfg.seed}__{time.strftime('%Y%m%d-%H%M%S')}"


def create_run_dir(cfg: Config) -> RunDir:
    """Make a fresh run directory and write ``config.json``; refuses to overwrite a finished run.

    Raises:
        ConfigError: the name would leave ``runs_dir`` (``..``, a separator, an absolute path),
            or the run already exists.
    """
    name = cfg.run_name if cfg.run_name is not None else default_run_name(cfg)
    check_run_name(name)  # here too, for callers that never ran Config.validate
    run = RunDir(Path(cfg.runs_dir) / name)
    if run.config.exists():
        raise ConfigError(
            f"run directory {run.root} already exists; choose another {flag('run_name')}, or"
            f" continue it with {flag('resume')} {run.root}"
        )
    try:
        for path in (run.root, run.tb, run.videos, run.checkpoints):
            path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:  # --runs-dir names a file, or a place this user cannot write
        raise ConfigError(
            f"{flag('runs_dir')} {cfg.runs_dir}: cannot make {run.root} ({exc.strerror})"
        ) from None
    write_config(run, cfg)
    return run


@contextlib.contextmanager
def removed_if_start_fails(run: RunDir, fresh: bool) -> Iterator[Callable[[], None]]:
    """A new run whose start fails (its port taken, no CUDA device, Ctrl-C while it builds)
    leaves no directory behind, so the same --run-name works on the retry. Call the function
    it yields once training begins: from then on the directory stays, whatever happens. Nothing
    of value goes: no label is asked before training begins (labels of --labels-from are
    copies). ``fresh``: this session made the directory (never a resumed run's)."""
    began = False

    def started() -> None:
        nonlocal began
        began = True

    try:
        yield started
    except BaseException:
        if fresh and not began:
            shutil.rmtree(run.root, ignore_errors=True)
        raise


def write_config(run: RunDir, cfg: Config) -> None:
    """(Re)write ``config.json`` atomically: readers see the old file or the new, never a torn one.

    A resumed run with a raised budget stores its new config this way; the file is synced before
    the rename so a power cut cannot leave an empty ``config.json`` behind. It carries its schema
    version and ``sha256``, the digest of the rest (see :func:`checked_config`).
    """
    body = json.loads(json.dumps(stored_dict(cfg), default=str))  # as a reader will see it
    body["config_schema"] = CONFIG_SCHEMA
    if cfg.teacher.target is not None:
        body[TARGET_CATALOGUE] = CATALOGUE_VERSION
    text = json.dumps({**body, "sha256": config_digest(body)}, indent=2) + "\n"
    # 0o644: mkstemp makes the file private; config.json never was.
    replace_atomic(run.config, lambda f: f.write(text.encode()), mode=0o644, suffix=".tmp.json")


def stored_dict(cfg: Config) -> dict:
    """``cfg`` as a run keeps it on disk (``config.json``, TensorBoard's hparams): without the web
    access token, which is a secret of the session (a resumed run gets a new one or ``--token``)."""
    return replace(cfg, web=replace(cfg.web, token=None)).to_dict()


def read_config(path: str | Path) -> Config:
    """The configuration stored in run directory ``path`` (for ``--resume``); one-line errors."""
    run = RunDir(Path(path))
    if not run.root.is_dir():
        raise ConfigError(f"--resume {path}: no such run directory")
    try:
        text = run.config.read_text()
    except FileNotFoundError:
        raise ConfigError(
            f"--resume {path}: no config.json in it (is it a run directory?)"
        ) from None
    except OSError as exc:
        raise ConfigError(f"--resume {path}: cannot read config.json ({exc.strerror})") from None
    way_out = (
        f"start a new run on its labels with --labels-from {short_path(run.root)} --run-name NEW"
    )
    try:
        data = checked_config(parse_json(text))
    except ValueError as exc:  # json's errors and checked_config's
        raise ConfigError(f"{run.config} {exc}; {way_out}") from None
    try:
        return Config.from_dict(stored_as_it_ran(data))
    except ConfigError as exc:
        raise ConfigError(f"{run.config}: {exc}; {way_out}") from None


def resumed_config(root: Path, stored: Config, given: Config) -> Config:
    """The config of a resumed run: ``given`` (the command line parsed over ``stored``) checked.

    Only :data:`SESSION_ONLY` settings may change and :data:`RAISE_ONLY` ones rise; the run keeps
    its directory, so ``run_name``/``runs_dir`` are its name and parent. ``resume`` is ``root``.

    Raises:
        ConfigError: naming the first flag that would change the run.
    """
    _check_catalogue(root, stored)
    given = auto_as_stored(stored, given)
    if given.run_name != root.name:
        raise ConfigError(f"{flag('run_name')} must be {root.name!r} (the resumed run) or absent")
    if Path(given.runs_dir).resolve() != root.parent.resolve():
        raise ConfigError(f"{flag('runs_dir')} must be {str(root.parent)!r} or absent on --resume")
    for path in leaf_paths(Config):
        old, new = get(stored, path), get(given, path)
        if path in SESSION_ONLY | {"run_name", "runs_dir", "resume"} or new == old:
            continue
        if path in RAISE_ONLY and rises(path, old, new):
            continue
        verb = "be lowered" if path in RAISE_ONLY else "change"
        was = _shown(old) + (", no limit" if path == "max_minutes" and not old else "")
        raise ConfigError(
            f"{flag(path)} cannot {verb} on --resume (the run was started with {was})"
        )
    return replace(given, run_name=root.name, runs_dir=str(root.parent), resume=str(root))


def _check_catalogue(root: Path, stored: Config) -> None:
    """Refuse to resume a run that learns from a target whose definition has changed since it
    started: its labels (the synthetic teacher's) or its reward (``--reward env``) come from the
    old target, its new steps would come from the new one. A person's labels stay valid (the
    target only measures there), so a run with human feedback resumes, its target curve on the
    new definition from then on. A file without the version predates it: catalogue 1."""
    learns = stored.feedback == "synthetic" or stored.reward == "env"
    if stored.teacher.target is None or not learns:
        return
    data = parse_json(RunDir(root).config.read_text())
    version = data.get(TARGET_CATALOGUE, 1) if isinstance(data, dict) else 1
    if version != CATALOGUE_VERSION:
        raise ConfigError(
            f"--resume {root}: its {flag('teacher.target')} {stored.teacher.target} comes from"
            f" target catalogue {version} and this rlhf has catalogue {CATALOGUE_VERSION} (every"
            " step pays in [0, 1]), so the rest of the run would learn another behaviour than"
            " its labels: start a new run (docs/guide/synthetic.md)"
        )


def auto_as_stored(stored: Config, given: Config) -> Config:
    """``given`` with ``--sac.hidden-dtype auto`` read as what the run resolved it to when it
    started: auto is a rule about the machine, and a run resumed on another keeps its precision."""
    if given.sac.hidden_dtype != "auto":
        return given
    return replace(given, sac=replace(given.sac, hidden_dtype=stored.sac.hidden_dtype))


def _shown(value: object) -> str:
    """A stored value as it would be typed on the command line."""
    return " ".join(map(str, value)) if isinstance(value, tuple) else str(value)


def open_run_dir(path: str | Path) -> RunDir:
    """An existing run directory (for ``rlhf serve``); one-line error if it is not one."""
    run = RunDir(Path(path))
    if not run.labels.exists():
        raise ConfigError(f"{run.root} is not a run directory (no labels.sqlite in it)")
    return run


@contextlib.contextmanager
def trainer_lock(run: RunDir) -> Iterator[None]:
    """Hold the run for one trainer: a second ``rlhf train --resume`` of a run that is training
    (which would write the same checkpoints and TensorBoard files) is one line instead.

    An advisory ``flock`` that the kernel drops when the process dies, so a killed trainer
    leaves no stale lock behind.
    """
    fd = os.open(run.lock, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise busy(run) from None
        # No other writer is alive now: what a killed one left half-written can go.
        remove_orphan_temps([run.root, run.checkpoints])
        yield
    finally:
        os.close(fd)


def busy(run: RunDir) -> ConfigError:
    """The one line for a run that another trainer holds."""
    return ConfigError(
        f"{run.root} is being trained by another process; stop it first (Ctrl-C there"
        " writes a checkpoint), then --resume"
    )


def is_trainer_running(run: RunDir) -> bool:
    """Whether a trainer holds ``run`` now (see :func:`trainer_lock`)."""
    try:
        fd = os.open(run.lock, os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False
