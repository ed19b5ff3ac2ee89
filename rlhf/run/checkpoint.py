"""Atomic checkpoint files: a run's whole state, written so that a crash never leaves half a file.

A checkpoint is a dict of tensors and plain values (no pickled classes), so it loads with
``torch.load(weights_only=True)``: opening a checkpoint cannot run code. It is written to a
temporary file in the same directory, flushed to disk, renamed over the old one and the directory
entry synced, so at every moment ``last.pt`` is either the previous checkpoint or the new one.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import torch

from rlhf.config import ConfigError
from rlhf.core.files import replace_atomic

FORMAT = 1
"""Version of the checkpoint layout; a newer one is refused instead of misread."""


class CheckpointError(ConfigError):
    """A checkpoint is missing, unreadable or from a newer rlhf; the message is one line."""


def save_atomic(obj: Any, path: Path) -> int:
    """``torch.save`` ``obj`` to ``path`` atomically and durably; returns the file size in bytes."""
    replace_atomic(path, lambda f: torch.save(obj, f))
    return path.stat().st_size


def save_checkpoint(state: dict[str, Any], path: Path) -> int:
    """Write a run checkpoint (``state`` plus the format version); returns its size in bytes."""
    return save_atomic({"format": FORMAT, **state}, path)


def load_checkpoint(path: Path, device: torch.device | str = "cpu") -> dict[str, Any]:
    """Read a checkpoint written by :func:`save_checkpoint`.

    Raises:
        CheckpointError: the file is missing, damaged, or written by a newer rlhf.
    """
    if not path.is_file():
        raise CheckpointError(f"{path} does not exist")
    try:
        state = torch.load(path, map_location=device, weights_only=True)
    except Exception as exc:  # a damaged file: say which, in one line
        raise CheckpointError(f"{path} cannot be read ({type(exc).__name__})") from exc
    version = state.get("format") if isinstance(state, dict) else None
    if not isinstance(version, int) or version > FORMAT:
        raise CheckpointError(
            f"{path} has checkpoint format {version!r}; this rlhf reads up to {FORMAT}: upgrade rlhf"
        )
    return state


def rng_state(rng: np.random.Generator) -> dict[str, Any]:
    """The state of a numpy generator as plain values (restored by :func:`set_rng_state`)."""
    return rng.bit_generator.state


def set_rng_state(rng: np.random.Generator, state: dict[str, Any]) -> None:
    rng.bit_generator.state = state
