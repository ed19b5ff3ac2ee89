"""Settings that came after a run's ``config.json`` was written, and how that run ran without them.

An upgraded rlhf must still resume, record and report the runs an older one left: their
``config.json`` lacks every setting added since, and each is filled with the value that means
"as before it existed" (mostly: off), never with today's default where that differs. A setting
added without an entry here would leave those runs unreadable ("is incomplete"), so
tests/run/test_run_dir.py reads a ``config.json`` as the first signed rlhf wrote it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rlhf.config.presets import DEFAULT


@dataclass(frozen=True)
class SameAs:
    """A setting that a run had at the value of another in its section."""

    key: str


BEFORE_SCHEMA: tuple[tuple[str, str, Any], ...] = (
    ("ppo", "init_log_std", DEFAULT.init_log_std),  # the per-env ones at the general defaults,
    ("query", "replay_share", DEFAULT.replay_share),  # so an old Ant run does not start replaying
    ("ppo", "end_margin", DEFAULT.end_margin),
    ("ppo", "end_value", "absorbing"),  # the way before --ppo.end-value
    ("reward_model", "min_epoch_steps", DEFAULT.min_epoch_steps),
    ("reward_model", "output_init", DEFAULT.output_init),
    ("sac", "hidden_dtype", "float32"),  # not "auto": what the run multiplied in
)
"""Settings added before ``config.json`` carried ``config_schema`` (a file from then names only
what :data:`rlhf.run.config_file.LEGACY_REQUIRED` lists for sure; the rest keep their defaults)."""

SINCE_SCHEMA_1: tuple[tuple[str, str, Any], ...] = (
    ("ppo", "min_std", 0.0),  # no floor on the policy's noise
    ("ppo", "restart_at", 0.0),  # the policy never restarted
    ("query", "ask_when_new", None),  # labels by the schedule alone
    ("query", "ask_ahead", 0.1),  # read only with --query.ask-when-new
    ("query", "ask_until", 1.0),  # labels spread over the whole run
    ("reward_model", "explore_bonus", 0.0),  # no RUNE bonus
    ("reward_model", "explore_half_life", 100_000),  # read only with the bonus
    ("reward_model", "input_sparsity", 0.0),
    ("reward_model", "output_bound", "none"),  # unbounded
    ("reward_model", "restart_below", 0.0),  # members never restarted
    ("reward_model", "sees", "observation"),  # the reward read every observation entry
    ("reward_model", "self_predict", 0.0),
    ("reward_model", "effort_cost", False),  # the network read the actions
    ("sac", "recent_share", 0.0),  # uniform replay
    ("sac", "recent_steps", 10_000),  # read only with a recent share
    ("sac", "init_alpha", 1.0),  # autotune started at 1
    ("sac", "update_every", 1),  # a gradient step every env step
    ("sac", "end_margin", 0.0),  # an end worth what the labels said
    ("video", "ready_ahead_max", SameAs("ready_ahead")),  # a fixed number of pairs kept ready
    ("", "max_minutes", 0.0),  # no time limit ("": a top-level setting)
)
"""Settings added after ``config_schema`` 1: a signed file of that schema may lack these, and
only these (a setting it lacks that schema 1 had means the file was damaged)."""

ADDED_SINCE_SCHEMA_1 = frozenset(
    f"{section}.{key}" if section else key for section, key, _ in SINCE_SCHEMA_1
)
""":data:`SINCE_SCHEMA_1` as config paths (``section.key``)."""


def stored_as_it_ran(data: dict[str, Any]) -> dict[str, Any]:
    """A stored ``config.json``'s data with the settings it lacks at the values its run had
    before they existed (:data:`BEFORE_SCHEMA`, :data:`SINCE_SCHEMA_1`)."""
    if not isinstance(data, dict):
        return data  # not a config: Config.from_dict says so in one line
    out = dict(data)
    for section, key, value in BEFORE_SCHEMA + SINCE_SCHEMA_1:
        if not section:
            out.setdefault(key, value)
            continue
        part = out.get(section, {})
        if isinstance(part, dict) and key not in part:  # anything else: from_dict says what
            if isinstance(value, SameAs):
                if value.key not in part:
                    continue  # both keep their defaults (Config.from_dict)
                value = part[value.key]
            out[section] = {**part, key: value}
    return out
