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

import hashlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

from rlhf.config import ConfigError
from rlhf.core.files import replace_atomic

FORMAT = 2
"""Version of the checkpoint layout (2: with ``sha256``); a newer one is refused, not misread."""

CHECKED = ("agent", "preferences")
"""The parts of a checkpoint whose tensors must be finite: what acts and what scores."""


class CheckpointError(ConfigError):
    """A checkpoint is missing, unreadable, damaged or from a newer rlhf; the message is one line."""


def save_atomic(obj: Any, path: Path) -> int:
    """``torch.save`` ``obj`` to ``path`` atomically and durably; returns the file size in bytes."""
    replace_atomic(path, lambda f: torch.save(obj, f))
    return path.stat().st_size


def save_checkpoint(state: dict[str, Any], path: Path) -> int:
    """Write a run checkpoint (``state``, the format version and the digest of both); returns
    its size in bytes."""
    return save_signed({"format": FORMAT, **state}, path)


def save_signed(state: dict[str, Any], path: Path) -> int:
    """``state`` plus ``sha256``, the digest of the rest, written atomically (``agent.pt``)."""
    return save_atomic({**state, "sha256": state_digest(state)}, path)


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
    """A dict saved with ``torch.save`` (as :func:`save_signed` writes it), without its digest.

    The digest is checked when the file has one (or ``signed(state)`` says it must); the
    floating tensors under the keys ``checked`` (None: all) must be finite.

    Raises:
        CheckpointError: missing, unreadable, not a dict, damaged, or holding NaN or infinity.
    """
    if not path.is_file():
        raise CheckpointError(f"{path} does not exist")
    tail = f"; {way_out}" if way_out else ""
    try:
        state = torch.load(path, map_location=device, weights_only=True)
    except Exception as exc:  # a damaged file: say which, in one line
        raise CheckpointError(f"{path} cannot be read ({type(exc).__name__}){tail}") from exc
    if not isinstance(state, dict):
        raise CheckpointError(f"{path} is not an rlhf checkpoint (it holds no dict){tail}")
    digest = state.pop("sha256", None)
    if (digest is not None or signed(state)) and digest != state_digest(state):
        raise CheckpointError(f"{path} is damaged: its content does not match its checksum{tail}")
    parts = state.keys() if checked is None else checked
    bad = [where for part in parts for where in nonfinite(state.get(part), part)]
    if bad:
        raise CheckpointError(f"{path} holds non-finite values (in {bad[0]}){tail}")
    return state


def state_digest(obj: Any) -> str:
    """SHA-256 of a checkpoint's content: the same for a state and its ``torch.load`` copy.

    Dicts are fed in insertion order (pickle keeps it), sets sorted, tensors and arrays as
    dtype, shape and raw bytes, plain values as their type and ``repr`` (exact for floats).
    """
    h = hashlib.sha256()
    _feed(h, obj)
    return h.hexdigest()


def _feed(h: Any, obj: Any) -> None:
    if isinstance(obj, torch.Tensor):
        t = obj.detach().cpu().contiguous()
        h.update(f"T{t.dtype}{tuple(t.shape)}|".encode())
        if t.numel():  # an empty tensor (an empty replay buffer's rows) has no bytes to view
            h.update(memoryview(t.reshape(-1).view(torch.uint8).numpy()))
    elif isinstance(obj, np.ndarray) and obj.dtype != object:
        a = np.ascontiguousarray(obj)
        h.update(f"A{a.dtype.str}{a.shape}|".encode())
        h.update(memoryview(a.reshape(-1).view(np.uint8)))
    elif isinstance(obj, dict):
        h.update(f"D{len(obj)}|".encode())
        for key, value in obj.items():
            _feed(h, key)
            _feed(h, value)
    elif isinstance(obj, list | tuple):
        h.update(f"{'L' if isinstance(obj, list) else 'U'}{len(obj)}|".encode())
        for item in obj:
            _feed(h, item)
    elif isinstance(obj, set | frozenset):  # no stable order across processes: sort digests
        h.update(f"S{len(obj)}|{''.join(sorted(state_digest(i) for i in obj))}".encode())
    elif isinstance(obj, bytes | bytearray):
        h.update(f"B{len(obj)}|".encode())
        h.update(obj)
    else:
        text = f"{type(obj).__name__}:{obj!r}"
        h.update(f"V{len(text)}|{text}".encode())


def nonfinite(obj: Any, where: str = "") -> list[str]:
    """Where ``obj`` (nested dicts and lists) holds a floating tensor with a NaN or an infinity.

    Plain floats are not looked at: a figure such as a validation accuracy is NaN by design
    before it can be measured.
    """
    if isinstance(obj, torch.Tensor):
        finite = not obj.is_floating_point() or bool(torch.isfinite(obj).all())
        return [] if finite else [where]
    if isinstance(obj, dict):
        return [w for key, value in obj.items() for w in nonfinite(value, f"{where}.{key}")]
    if isinstance(obj, list | tuple):
        return [w for i, value in enumerate(obj) for w in nonfinite(value, f"{where}[{i}]")]
    return []


def rng_state(rng: np.random.Generator) -> dict[str, Any]:
    """The state of a numpy generator as plain values (restored by :func:`set_rng_state`)."""
    return rng.bit_generator.state


def set_rng_state(rng: np.random.Generator, state: dict[str, Any]) -> None:
    rng.bit_generator.state = state
