"""Per-env settings: what a task needs that the general defaults do not give it.

Like rl-zoo3's per-env hyperparameters, but few and each measured (README, "Results"): a setting
left unset (None) on the command line takes the env's preset value if it has one, else the general
default, before the run stores its config. So ``config.json`` holds the values used, a resumed run
keeps them, and any flag given explicitly wins. The same preset applies to true-reward PPO, so a
benchmark's comparison stays between equal agents.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Literal, TypeVar

from rlhf.config import Config, QueryConfig, RewardConfig, flag

_Section = TypeVar("_Section", RewardConfig, QueryConfig)


@dataclass(frozen=True)
class Preset:
    """What one env family starts with, and why (one line, shown when a run starts)."""

    init_log_std: float
    replay_share: float
    why: str
    end_margin: float = 0.0
    min_epoch_steps: int = 1
    output_init: Literal["random", "zero"] = "random"
    val_fraction: float = 0.2
    max_epochs: int = 30
    pool_size: int = 2000
    selection: Literal["uniform", "disagreement", "entropy"] = "disagreement"


DEFAULT = Preset(init_log_std=0.0, replay_share=0.0, why="")
"""The general defaults (PPO's std 1 as in CleanRL; no replayed pairs; an end valued as the
learned absorbing reward; reward members that start random, train one pass an epoch and stop
early on a fifth of the labels held out)."""

SAC = Preset(
    init_log_std=0.0,
    replay_share=0.0,
    val_fraction=0.0,
    max_epochs=100,
    min_epoch_steps=32,
    pool_size=125,
    selection="uniform",
    why="SAC optimises whatever the first round leaves, and a round that stops early on a fifth"
    " of 200 labels, or passes over them in a few steps, had not fitted them; PEBBLE fits every"
    " label, and asks about what the policy does now, as QPA (measured:"
    " docs/results/off-policy.md)",
)
"""What every env starts with under ``--algo sac`` (PEBBLE): its reward rounds fit every label
for up to 100 epochs of at least 32 gradient steps, without a validation split, and its pairs
are drawn at random from the 125 latest segments (QPA's policy-aligned queries, without QPA's
hybrid replay). SAC has no per-env presets (those were all measured with PPO)."""

_FLAT_START = {"min_epoch_steps": 32, "output_init": "zero"}
"""Reward members that start flat and train at least 32 steps an epoch: for the tasks whose
first rounds stopped near chance (one setting, measured on each task that has it)."""

PRESETS: dict[str, Preset] = {
    "HalfCheetah": Preset(
        init_log_std=0.0,
        replay_share=0.0,
        **_FLAT_START,
        why="its first rounds, on the untrained policy's alike segments, stopped near chance"
        " (measured with 200 labels, 10% wrong: docs/results/few-labels-reward.md)",
    ),
    "Ant": Preset(
        init_log_std=-1.0,
        replay_share=0.3,
        why="at std 1 its control cost makes flailing worse than ending an episode, and its"
        " labels tie action size to progress (measured: docs/results/ant.md)",
    ),
    "Hopper": Preset(
        init_log_std=0.0,
        replay_share=0.0,
        end_margin=0.3,
        why="an end counted below its learned reward keeps it hopping (measured:"
        " docs/results/episode-ends.md)",
    ),
    "Walker2d": Preset(
        init_log_std=0.0,
        replay_share=0.0,
        **_FLAT_START,
        why="its first rounds, from episodes of ~20 steps, stopped near chance (measured:"
        " docs/results/walker2d.md)",
    ),
}
"""By env family, the env id's name without its version (``Ant-v5`` -> ``Ant``)."""


def family(env_id: str) -> str:
    """``Ant-v5`` -> ``Ant``; an id without a version is its own family."""
    name, _, version = env_id.rpartition("-v")
    return name if name and version.isdigit() else env_id


def preset_for(env_id: str) -> Preset:
    return PRESETS.get(family(env_id), DEFAULT)


def learns_reward(cfg: Config) -> bool:
    """Does this run train a reward model (not the env's reward, not a saved one)?"""
    return cfg.reward == "learned" and cfg.reward_model_file is None


def replays_possible(cfg: Config) -> bool:
    """Replayed pairs need PPO, labels to ask for and a learned end of episode (preflight checks
    the env)."""
    return cfg.algo == "ppo" and learns_reward(cfg) and cfg.termination_mode != "standard"


def learned_end(cfg: Config) -> bool:
    """Does PPO value an episode's end with a learned absorbing reward (what --end-margin
    moves)? A saved reward has one too."""
    return cfg.algo == "ppo" and cfg.reward == "learned" and cfg.termination_mode == "absorbing"


def learned_end_sac(cfg: Config) -> bool:
    """Does SAC value an episode's end with the absorbing reward it learns in this run (what
    --sac.end-margin moves)? With a saved reward it bootstraps an end from 0."""
    return cfg.algo == "sac" and learns_reward(cfg) and cfg.termination_mode == "absorbing"


def idle_settings(cfg: Config) -> list[str]:
    """One line for each setting given that this run has nothing to apply to (accepted, so a
    sweep may set it across algorithms, but never silently)."""
    idle = []
    margin = cfg.ppo.end_margin
    if margin is not None and margin != 0 and not learned_end(cfg):
        idle.append(
            f"{flag('ppo.end_margin')} {margin:g} does nothing here: it moves the end of an"
            f" episode that PPO learns with {flag('reward')} learned and {flag('terminations')}"
            " absorbing"
        )
    if cfg.sac.end_margin and not learned_end_sac(cfg):
        idle.append(
            f"{flag('sac.end_margin')} {cfg.sac.end_margin:g} does nothing here: it moves the end"
            f" of an episode that SAC learns with {flag('reward')} learned and"
            f" {flag('terminations')} absorbing"
        )
    if cfg.ppo.restart_at and not (cfg.algo == "ppo" and learns_reward(cfg)):
        idle.append(
            f"{flag('ppo.restart_at')} {cfg.ppo.restart_at:g} does nothing here: it restarts"
            f" PPO's policy while a reward is learned from labels ({flag('algo')} ppo,"
            f" {flag('reward')} learned, no {flag('reward_model_file')})"
        )
    return idle


RUN_FILLED_REWARD = ("min_epoch_steps", "output_init", "val_fraction", "max_epochs")
"""The --reward-model.* settings a run fills from its env and algorithm when they are unset."""
RUN_FILLED_QUERY = ("pool_size", "selection")
"""The --query.* settings a run fills from its algorithm when they are unset."""


def with_preset(cfg: Config) -> tuple[Config, str | None]:
    """``cfg`` with its unset per-env settings filled, and the line that says which came from
    the env's preset (None when none did)."""
    preset = preset_for(cfg.env_id) if cfg.algo == "ppo" else SAC
    learns = learns_reward(cfg)
    applies = {  # (section, setting) -> does the env's value apply to this run?
        ("ppo", "init_log_std"): True,  # the true-reward baseline starts as calm
        ("query", "replay_share"): replays_possible(cfg),
        ("ppo", "end_margin"): learned_end(cfg),
        **{("reward_model", key): learns for key in RUN_FILLED_REWARD},
        **{("query", key): learns for key in RUN_FILLED_QUERY},
    }
    sections = {section: getattr(cfg, section) for section, _ in applies}
    used: list[str] = []
    for (section, key), applied in applies.items():
        if getattr(sections[section], key) is not None:
            continue  # a flag given wins
        value = getattr(preset if applied else DEFAULT, key)
        sections[section] = dataclasses.replace(sections[section], **{key: value})
        if value != getattr(DEFAULT, key):
            shown = f"{value:g}" if isinstance(value, float) else value
            used.append(f"{flag(f'{section}.{key}')} {shown}")
    line = None
    if used:
        name = f"{family(cfg.env_id)} preset" if preset is not SAC else f"{flag('algo')} sac"
        line = f"{name}: {', '.join(used)} ({preset.why}; set a flag to change)"
    return dataclasses.replace(cfg, **sections), line


def general_reward(reward: RewardConfig) -> RewardConfig:
    """``reward`` with the settings a run fills from its env and algorithm, where unset (None),
    at the general defaults: what fitting labels outside a run (rlhf reward, a benchmark, a
    test) uses."""
    return _general(reward, RUN_FILLED_REWARD)


def general_queries(query: QueryConfig) -> QueryConfig:
    """``query`` with the settings a run fills from its algorithm, where unset (None), at the
    general defaults: what a trainer built without :func:`with_preset` (a test) uses."""
    return _general(query, RUN_FILLED_QUERY)


def _general(section: _Section, keys: tuple[str, ...]) -> _Section:
    """``section`` with each of ``keys`` that is unset (None) at its general default."""
    unset = {k: getattr(DEFAULT, k) for k in keys if getattr(section, k) is None}
    return dataclasses.replace(section, **unset) if unset else section
