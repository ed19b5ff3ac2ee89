"""Range checks of numeric settings, one line each, naming the setting as ``{path}``.

Every numeric flag has a range: a lower bound where smaller makes no sense, and an upper bound
where a larger value cannot be meant (it would take years, or more memory than any machine has),
so a typo such as ``--total-timesteps 99999999999999999999999`` is one line, not a run that
never ends. Floats must be finite unless a bound says otherwise (``nan`` passes no comparison, so
it is refused by every check here). The checker is :func:`rlhf.config._check`, passed in, so
messages render each setting as the flag ``--help`` shows.
"""

from __future__ import annotations

import math
from collections.abc import Callable

Check = Callable[..., None]
"""``rlhf.config._check``: (cond, template naming settings as {path}, suffix)."""

SEED_MAX = 2**32 - 1
"""The largest seed: what numpy's legacy seeding, and most tools a seed is passed on to, take."""
STEPS_MAX = 10**12
"""Env steps no run reaches: a million steps a second for eleven days."""
BIG = 10**9
"""A count (iterations, epochs, labels) far beyond any run's."""
WIDTH_MAX = 4096
"""Widest hidden layer of a network (wider ones do not fit a reward or a policy MLP here)."""


def _shown(bound: float) -> str:
    if isinstance(bound, int) and abs(bound) >= 1_000_000:  # 1,000,000 not 1000000; 65535
        return f"{bound:,}"
    return f"{bound:g}" if isinstance(bound, float) else str(bound)


def _finite(check: Check, path: str, value: float | None) -> None:
    finite = not isinstance(value, float) or math.isfinite(value)
    check(finite, f"{{{path}}} must be a finite number")


# None is an unset optional setting: every check passes, and still runs (so a test that records
# the checks sees every message).
def at_least(check: Check, path: str, value: float | None, lo: float, hi: float) -> None:
    """``lo <= value <= hi`` (None: unset); two messages, ">=" and "<="."""
    _finite(check, path, value)
    check(value is None or value >= lo, f"{{{path}}} must be >= {_shown(lo)}")
    check(value is None or value <= hi, f"{{{path}}} must be <= {_shown(hi)}")


def above(check: Check, path: str, value: float | None, lo: float, hi: float) -> None:
    """``lo < value <= hi`` (None: unset); ">" and "<=" messages."""
    _finite(check, path, value)
    check(value is None or value > lo, f"{{{path}}} must be > {_shown(lo)}")
    check(value is None or value <= hi, f"{{{path}}} must be <= {_shown(hi)}")


def within(check: Check, path: str, value: float | None, lo: float, hi: float, ends: str) -> None:
    """``value`` in the interval from ``lo`` to ``hi``, ``ends`` one of "[]", "[)", "(]" (None:
    unset); one message that names the interval (nan and inf fall outside it)."""
    inside = value is None or (
        (value >= lo if ends[0] == "[" else value > lo)
        and (value <= hi if ends[1] == "]" else value < hi)
    )
    interval = f"{ends[0]}{_shown(lo)}, {_shown(hi)}{ends[1]}"
    check(inside, f"{{{path}}} must be in {interval}")


def seed(check: Check, path: str, value: int) -> None:
    """A seed: 0 to :data:`SEED_MAX`."""
    at_least(check, path, value, 0, SEED_MAX)
