"""What the benchmark grids share: their seed sets and seed flags, a run's settings applied to
its Config, the settings that change the task, and --target's behaviours checked before any run.

bench_rlhf.py, bench_pebble.py and bench_later_labels.py import it (never each other), as do
their private modules, so a seed set or a flag means one thing in all of them.
"""

from __future__ import annotations

import argparse
import itertools
from typing import Any

from rlhf.config import Config, ConfigError, flag
from rlhf.sweep.spec import SpecError, nested

SEED_SETS = {"tune": range(1, 13), "report": range(101, 10_000)}
"""--seed-set -> its seeds: tune, the seeds presets were historically chosen on; report, seeds
never used to tune anything (a setting is reported on seeds it was not tuned on)."""

TASK_SETTINGS = ("env_kwargs",)
"""--set settings that change the task itself (the env's own arguments, e.g. Ant-v5's
``include_cfrc_ext_in_observation``): every arm of a benchmark runs with them, the baseline on the
true reward too, so its ratio compares learners on one task."""


def add_seed_flags(parser: argparse.ArgumentParser, default: str, help_set: str) -> None:
    """--seed-set, --n-seeds and --seeds, one meaning each in every benchmark that takes them."""
    seeds = parser.add_argument_group("seeds (printed before the table)")
    seeds.add_argument("--seed-set", choices=list(SEED_SETS), default=default, help=help_set)
    seeds.add_argument(
        "--n-seeds", type=int, default=None, help="the first K of the set (default 3; --quick 1)"
    )
    seeds.add_argument("--seeds", type=int, nargs="+", default=None, help="these seeds instead")


def choose_seeds(args: argparse.Namespace) -> tuple[list[int], str]:
    """The seeds (--seeds, else the first --n-seeds of --seed-set) and where they come from."""
    if args.seeds:
        return list(dict.fromkeys(args.seeds)), "given"
    n = args.n_seeds or (1 if args.quick else 3)
    seeds = list(SEED_SETS[args.seed_set][:n])
    if len(seeds) < n:
        raise SpecError(f"--n-seeds {n}: the {args.seed_set} set has {len(seeds)} seeds")
    return seeds, args.seed_set


def task_settings(settings: tuple[tuple[str, Any], ...]) -> tuple[tuple[str, Any], ...]:
    """Those of ``settings`` that change the task (TASK_SETTINGS): for every arm."""
    return tuple((path, value) for path, value in settings if path in TASK_SETTINGS)


def with_settings(cfg: Config, settings: tuple[tuple[str, Any], ...]) -> Config:
    """``cfg`` with each (config path, value) of ``settings`` set (paths are at most one
    section deep)."""
    data = cfg.to_dict()
    for key, value in nested(dict(settings)).items():
        data[key] = {**data[key], **value} if isinstance(value, dict) else value
    return Config.from_dict(data)


def settings_from_json(items: list[Any]) -> tuple[tuple[str, Any], ...]:
    """(path, value) pairs read back from JSON, which made their tuples lists."""
    return tuple((k, tuple(v) if isinstance(v, list) else v) for k, v in items)


def check_targets(names: list[str] | None, envs: list[str]) -> list[str | None]:
    """--target's names (``none``: the env's own reward), each checked on every env (SpecError,
    one line naming the targets the env has)."""
    targets: list[str | None] = [None if n == "none" else n for n in dict.fromkeys(names or [])]
    for target, env_id in itertools.product(targets, envs):
        if target is None:
            continue
        from rlhf.envs.targets import target_fn  # the catalogue: only with --target

        try:
            with_settings(Config(env_id=env_id), (("teacher.target", target),)).validate()
        except ConfigError as exc:
            message = str(exc).replace(flag("teacher.target"), "--target")
            raise SpecError(f"--target {target} on {env_id}: {message}") from None
        try:
            target_fn(target, env_id)
        except ConfigError as exc:
            raise SpecError(str(exc).replace("--teacher.target", "--target")) from None
    return targets or [None]
