"""Atomic checkpoint files: a run's whole state, written so that a crash never leaves half a file,
and checked when read so that a damaged one is refused instead of trained from.

A checkpoint is a dict of tensors and plain values (no pickled classes), so it loads with
``torch.load(weights_only=True)``: opening a checkpoint cannot run code. It is written to a
temporary file in the same directory, flushed to disk, renamed over the old one and the directory
entry synced, so at every moment ``last.pt`` is either the previous checkpoint or the new one.

Since format 2 it carries ``sha256``, a digest of everything else in it (every tensor's bytes,
every key and plain value, see :func:`state_digest`): torch's zip reader does not check the CRCs
of its entries, so a file with 4 KiB overwritten in the middle used to load, and the policy it
held answered NaN. A digest over the loaded content catches that whatever part was hit. Format 1
files (no digest) still load; both are refused when the agent's or the reward's tensors hold a
NaN or an infinity.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

from rlhf.config import ConfigError
from rlhf.core import signed as signed_files
from rlhf.core.signed import SignedFileError, save_signed
from rlhf.core.signed import state_digest as state_digest  # re-exported

FORMAT = 2
"""Version of the checkpoint layout (2: with ``sha256``); a newer one is refused, not misread."""

CHECKED = ("agent", "preferences")
"""The parts of a checkpoint whose tensors must be finite: what acts and what scores."""


class CheckpointError(ConfigError):
    """A checkpoint is missing, unreadable, damaged or from a newer rlhf; the message is one line."""


def save_checkpoint(state: dict[str, Any], path: Path) -> int:
    """Write a run checkpoint (``state``, the format version and the digest of both); returns
    its size in bytes."""
    return save_signed({"format": FORMAT, **state}, path)


def load_checkpoint(
    path: Path, device: torch.device | str = "cpu", way_out: str = ""
) -> dict[str, Any]:
    """Read a checkpoint written by :func:`save_checkpoint` (its digest checked, without it).

    ``way_out``: what the person can do about a damaged file, appended to the message.

    Raises:
        CheckpointError: the file is missing, unreadable, damaged (its digest does not match,
            or its agent or reward holds NaN or infinity), or written by a newer rlhf.
    """
    state = load_signed(path, device, way_out, CHECKED, signed=_format_2)
    version = state.get("format")
    if not isinstance(version, int) or version > FORMAT:
        raise CheckpointError(
            f"{path} has checkpoint format {version!r}; this rlhf reads up to {FORMAT}: upgrade rlhf"
        )
    return state


def _format_2(state: dict[str, Any]) -> bool:
    version = state.get("format")
    return isinstance(version, int) and version >= 2


def load_signed(
    path: Path,
    device: torch.device | str = "cpu",
    way_out: str = "",
    checked: tuple[str, ...] | None = None,
    signed: Callable[[dict[str, Any]], bool] = lambda state: False,
) -> dict[str, Any]:
    """:func:`rlhf.core.signed.load_signed`, its error a :class:`CheckpointError`."""
    try:
        return signed_files.load_signed(path, device, way_out, checked, signed)
    except SignedFileError as exc:
        raise CheckpointError(str(exc)) from exc.__cause__


def rng_state(rng: np.random.Generator) -> dict[str, Any]:
    """The state of a numpy generator as plain values (restored by :func:`set_rng_state`)."""
    return rng.bit_generator.state


def set_rng_state(rng: np.random.Generator, state: dict[str, Any]) -> None:
    rng.bit_generator.state = state
