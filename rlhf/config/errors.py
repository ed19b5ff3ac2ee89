"""The error a setting raises, :class:`ConfigError`, and the checker that raises it with the
flag ``--help`` shows, apart from :mod:`rlhf.config` so that every module of the package can
use them without importing it (which nests those modules' sections: a cycle).

A message names a setting as ``{path}`` (``{query.total_labels}``); which flag that is
(``--query.total-labels``, or ``--learning-rate`` for PPO's flat names) depends on the command's
root class, which :mod:`rlhf.config` registers once with :func:`name_flags_of`.
"""

from __future__ import annotations

import re

from rlhf.config import paths as config_paths
from rlhf.config.ranges import Check


class ConfigError(ValueError):
    """A configuration value is out of range; the message is one line for the user."""


FIELD = re.compile(r"\{([a-z_.]+)\}")
"""A setting named in a message template: ``{reward_model.learning_rate}``."""

_roots: list[type] = []


def name_flags_of(root: type) -> None:
    """Called once by :mod:`rlhf.config` with ``Config``: the class ``{path}`` is a field of."""
    _roots[:] = [root]


def flag(path: str) -> str:
    """The ``rlhf train`` flag of a setting: ``query.total_labels`` -> ``--query.total-labels``."""
    return config_paths.flag(_roots[0], path)


def render_flags(template: str) -> str:
    """``template`` with each ``{path}`` replaced by that setting's flag."""
    return FIELD.sub(lambda m: flag(m.group(1)), template)


def check_setting(cond: bool, template: str, suffix: str = "") -> None:
    """Raise a one-line :class:`ConfigError` unless ``cond``.

    Messages name settings as ``{path}`` (e.g. ``{query.total_labels}``), never as a spelled-out
    flag, so a message always names the flag ``--help`` shows. ``suffix`` (a user's value) is
    appended as is, so braces in it are never taken for a setting.
    """
    if not cond:
        raise ConfigError(render_flags(template) + suffix)


def command_check(root: type) -> Check:
    """A checker for another command's settings: ``{path}`` names a field of ``root``
    (e.g. ``{test_fraction}`` of ``rlhf reward fit`` is ``--test-fraction``)."""

    def check(cond: bool, template: str, suffix: str = "") -> None:
        if not cond:
            named = FIELD.sub(lambda m: config_paths.flag(root, m.group(1)), template)
            raise ConfigError(named + suffix)

    return check
