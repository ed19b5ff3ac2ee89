"""Named labellers: who may label a run, each with an access link (token) of their own.

Without names the page has one anonymous labeller (per browser cookie) and the server's token
rules. With names, every request must carry one labeller's token; the label it sends records
that name, and a share of pairs (``--overlap``) is shown to a second labeller on purpose, so
the agreement between people can be measured. The tokens are kept in the run's store, so the
links stay the same across ``serve`` and ``train --resume``.
"""

from __future__ import annotations

import re
import secrets
from pathlib import Path

NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,31}$")


class LabellerError(ValueError):
    """A bad name or names file, said in one line naming the flag (config turns it into a
    ConfigError; this module stays below rlhf.config)."""


def labeller_names(flags: tuple[str, ...], file: str | None) -> tuple[str, ...]:
    """The names from ``--labeller`` and ``--labellers-file``, in order, without repeats."""
    names = list(flags)
    if file is not None:
        path = Path(file)
        try:
            lines = path.read_text(encoding="utf-8").splitlines()
        except (OSError, UnicodeDecodeError) as exc:
            raise LabellerError(f"--labellers-file {path}: cannot be read ({exc})") from None
        names += [line.split("#", 1)[0].strip() for line in lines]
        names = [n for n in names if n]
    for name in names:
        if not NAME_RE.match(name):
            raise LabellerError(
                f"--labeller {name!r}: a name is 1-32 letters, digits, '_', '.' or '-'"
                " (starting with a letter or digit)"
            )
    return tuple(dict.fromkeys(names))


def labeller_tokens(names: tuple[str, ...], stored: object) -> dict[str, str]:
    """``{name: token}``: the stored token of each name that has one, a new one otherwise."""
    known = stored if isinstance(stored, dict) else {}
    return {
        name: known[name] if isinstance(known.get(name), str) else secrets.token_urlsafe(18)
        for name in names
    }


def shows_twice(pair_id: int, overlap: float) -> bool:
    """Whether pair ``pair_id`` is one of the ``overlap`` share shown to a second labeller.

    A fixed scramble of the id (Knuth's multiplicative hash), so every process agrees on the
    same pairs without storing a choice, and the chosen ones are spread over the run.
    """
    if overlap <= 0:
        return False
    return ((pair_id * 2654435761) % 2**32) / 2**32 < overlap
