"""Files that say when they were damaged: a dict of tensors and plain values saved with
``torch.save`` atomically, with ``sha256``, a digest of the rest of its content.

torch's zip reader does not check the CRCs of its entries, so a file with 4 KiB overwritten in the
middle loads, and what it holds is garbage (a policy that answers NaN). A digest over the loaded
content catches that whatever part was hit. A run's checkpoints (:mod:`rlhf.run.checkpoint`), its
``agent.pt`` and its ``reward_model.pt`` (also what ``rlhf reward fit`` writes) are such files.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

from rlhf.core.files import replace_atomic


class SignedFileError(ValueError):
    """A signed file is missing, unreadable, damaged or holds NaN; the message is one line."""


def save_atomic(obj: Any, path: Path) -> int:
    """``torch.save`` ``obj`` to ``path`` atomically and durably; returns the file size in bytes."""
    replace_atomic(path, lambda f: torch.save(obj, f))
    return path.stat().st_size


def save_signed(state: dict[str, Any], path: Path) -> int:
    """``state`` plus ``sha256``, the digest of the rest, written atomically (``agent.pt``)."""
    return save_atomic({**state, "sha256": state_digest(state)}, path)


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
        SignedFileError: missing, unreadable, not a dict, damaged, or holding NaN or infinity.
    """
    if not path.is_file():
        raise SignedFileError(f"{path} does not exist")
    tail = f"; {way_out}" if way_out else ""
    try:
        state = torch.load(path, map_location=device, weights_only=True)
    except Exception as exc:  # a damaged file: say which, in one line
        raise SignedFileError(f"{path} cannot be read ({type(exc).__name__}){tail}") from exc
    if not isinstance(state, dict):
        raise SignedFileError(f"{path} is not an rlhf file (it holds no dict){tail}")
    digest = state.pop("sha256", None)
    if (digest is not None or signed(state)) and digest != state_digest(state):
        raise SignedFileError(f"{path} is damaged: its content does not match its checksum{tail}")
    parts = state.keys() if checked is None else checked
    bad = [where for part in parts for where in nonfinite(state.get(part), part)]
    if bad:
        raise SignedFileError(f"{path} holds non-finite values (in {bad[0]}){tail}")
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
