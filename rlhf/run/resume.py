"""Where a run goes on from: its checkpoint, or (killed before its first one) its labels; and
the one lines that say how to go on after a stop, a damaged checkpoint or a full disk."""

from __future__ import annotations

import errno
import json
import sqlite3
from pathlib import Path

from rlhf.config import Config, ConfigError
from rlhf.core.shell import program, short_path
from rlhf.run.checkpoint import CheckpointError, load_checkpoint
from rlhf.run.run_dir import RunDir, busy, is_trainer_running
from rlhf.run.trainer import LAST_CHECKPOINT, Trainer


def resume_state(cfg: Config) -> dict | None:
    """The checkpoint a resumed run continues from; ``{}``: a run killed before its first
    checkpoint, which continues from its labels with a fresh agent; None: a new run."""
    if cfg.resume is None:
        return None
    run_dir = RunDir(Path(cfg.resume))
    if not run_dir.config.is_file():  # what --resume on the command line refused already
        raise ConfigError(
            f"cannot resume {cfg.resume}: no config.json in it (is it a run directory?)"
        )
    if is_trainer_running(run_dir):  # say so before "no checkpoint yet"; the lock still decides
        raise busy(run_dir)
    path = run_dir.checkpoints / LAST_CHECKPOINT
    elsewhere = f"start a new run on its labels with --labels-from {short_path(run_dir.root)}"
    if not path.exists() and not _finished(run_dir):
        return {}  # stopped before its first checkpoint: nothing to lose but its labels, kept
    try:
        return load_checkpoint(path, way_out=f"{elsewhere} --run-name NEW")
    except CheckpointError as exc:
        error = str(exc)
    if not path.exists():  # the run finished, and its checkpoints were removed since
        error = f"{path} does not exist (removed by rlhf runs clean?); {elsewhere} --run-name NEW"
    raise ConfigError(f"cannot resume {cfg.resume}: {error}")


def _finished(run_dir: RunDir) -> bool:
    """Whether the run's ``summary.json`` says it finished (a damaged one: it did not)."""
    try:
        return json.loads(run_dir.summary.read_text()).get("status") == "finished"
    except (OSError, ValueError, AttributeError):
        return False


def disk_full_line(root: Path, error: OSError | sqlite3.Error) -> str:
    """One line for a run that filled its disk (or hit the file size limit): what, and how to
    go on once there is room."""
    reason = error.strerror if isinstance(error, OSError) else str(error)
    if isinstance(error, OSError) and error.errno == errno.EFBIG:
        what = f"a file under {short_path(root)} reached the file size limit ({reason})"
    elif "i/o" in reason.lower():  # SQLite's word for a write that failed for want of room too
        what = f"the disk under {short_path(root)} is full or failing ({reason})"
    else:
        what = f"the disk under {short_path(root)} is full ({reason})"
    return (
        f"{what}; every label stored before it is kept; free space, then continue with:"
        f" {resume_command(root)}"
    )


def resume_command(root: Path) -> str:
    """``rlhf train --resume RUN`` as it runs from the current shell."""
    return f"{program('rlhf')} train --resume {short_path(root)}"


def resume_hint(t: Trainer) -> str:
    """The one line the command line prints when a run was interrupted."""
    last, resume = t.run_dir.checkpoints / LAST_CHECKPOINT, resume_command(t.run_dir.root)
    if not last.exists():  # a second Ctrl-C before the first checkpoint
        return f"interrupted before its first checkpoint; continue with: {resume}"
    step = load_checkpoint(last)["progress"]["env_steps"]
    return f"interrupted at step {step:,}; continue with: {resume}"
