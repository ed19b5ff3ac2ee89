"""A sweep's SPEC: a TOML file (and flags) naming fixed settings, the grid, the seeds and setup.

```toml
seeds = [1, 2, 3]
setup = ["my_envs:register"]        # optional: imported in every worker (custom envs)

[train]                             # every cell: rlhf train flags without the dashes
env-id = "HalfCheetah-v5"
total-timesteps = 300_000

[grid]                              # every combination of these lists
"query.total-labels" = [200, 700]
"teacher.mistake" = [0.0, 0.1]
```

Keys are checked against the real ``rlhf train`` flags (``--learning-rate`` is ``learning-rate``;
field paths such as ``ppo.learning_rate`` and underscores are accepted too); a bad one is one line
naming it and the closest valid key. Values are typed as in ``config.json``.
"""

from __future__ import annotations

import difflib
import functools
import json
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rlhf.config import Config, ConfigError
from rlhf.config.paths import flag, leaf_paths
from rlhf.sweep.command import Sweep

TOP_LEVEL = ("seeds", "setup", "train", "grid")
RESERVED = {
    "run_name": "each cell's directory is named after its settings",
    "runs_dir": "the cells live in the sweep directory (--sweep-dir)",
    "resume": "a rerun of the sweep resumes its unfinished cells",
}
"""Settings the sweep sets itself, and why."""


class SpecError(ConfigError):
    """The SPEC or a sweep flag is wrong; the message is one line naming the key."""


@dataclass(frozen=True)
class Spec:
    """A validated grid: settings as config paths with typed values, in the order given."""

    train: tuple[tuple[str, Any], ...]
    """(path, value) of the settings every cell shares."""
    grid: tuple[tuple[str, tuple[Any, ...]], ...]
    """(path, values) of the settings that vary; the seeds are the last axis."""
    setup: tuple[str, ...] = ()
    """``module`` or ``module:function`` to run in every worker before its cell."""


@functools.cache
def _keys() -> dict[str, str]:
    """Every spelling a key may have (flag without dashes, field path) -> config path."""
    keys = {flag(Config, path)[2:]: path for path in leaf_paths(Config)}
    for path in leaf_paths(Config):
        keys.setdefault(path.replace("_", "-"), path)
    return keys


def key_name(path: str) -> str:
    """How the user writes the setting at ``path``: its rlhf train flag without the dashes."""
    return flag(Config, path)[2:]


def resolve_key(key: str, where: str) -> str:
    """The config path of a spec key; a one-line :class:`SpecError` naming the closest key."""
    normal = key.removeprefix("--").replace("_", "-")
    path = _keys().get(normal)
    if path is None:
        guess = _closest(normal)
        hint = f"; did you mean {guess}?" if guess else " (see rlhf train --help)"
        raise SpecError(f"{where}: unknown key {key!r}{hint}")
    if path in RESERVED:
        raise SpecError(f"{where}: {key} is set by the sweep ({RESERVED[path]})")
    return path


def _closest(key: str) -> str | None:
    """The valid key most like ``key``, whole or by its last part; None when nothing is close."""
    names = sorted({key_name(p) for p in leaf_paths(Config)} - {key_name(p) for p in RESERVED})

    def score(name: str) -> float:
        whole = difflib.SequenceMatcher(None, key, name).ratio()
        tail = difflib.SequenceMatcher(None, key.rpartition(".")[2], name.rpartition(".")[2])
        return max(whole, tail.ratio())

    best = max(names, key=score)
    return best if score(best) >= 0.75 else None


def load_spec(command: Sweep) -> Spec:
    """The grid of ``command``: its SPEC file, then its flags (a flag wins over the same key)."""
    data: dict[str, Any] = {"train": {}, "grid": {}}
    if command.spec is not None:
        data = _read_toml(Path(command.spec))
    where = Path(command.spec).name if command.spec else "rlhf sweep"
    train = _section(data, "train", where)
    grid = _section(data, "grid", where)
    for text in command.train:
        key, value = _flag_item(text, "--train", many=False)
        _take(train, grid, key, value)
    for text in command.grid:
        key, values = _flag_item(text, "--grid", many=True)
        _take(grid, train, key, values)
    seeds = data.get("seeds") if command.seeds is None else list(command.seeds)
    setup = data.get("setup", []) if not command.setup else list(command.setup)
    return build_spec(train, grid, seeds, setup, where)


def settings_from_flags(items: list[str], option: str) -> tuple[tuple[str, Any], ...]:
    """``KEY=VALUE`` flags (keys and values as ``--train`` takes them) as checked (config path,
    typed value) pairs in the order given; a bad one is a one-line :class:`SpecError`."""
    train = dict(_flag_item(text, option, many=False) for text in items)
    return build_spec(train, {}, where=option).train


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        data = tomllib.loads(path.read_text())
    except FileNotFoundError:
        if "=" in path.name:  # --grid a=1,2 b=3: tyro took b=3 for the SPEC
            raise SpecError(
                f"no such SPEC file: {path} (give each setting its own --grid or --train)"
            ) from None
        raise SpecError(f"no such SPEC file: {path}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise SpecError(f"cannot read SPEC {path}: {exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise SpecError(f"{path.name} is not valid TOML: {exc}") from None
    for key in data:
        if key in TOP_LEVEL:
            continue
        if key.removeprefix("--").replace("_", "-") in _keys():
            raise SpecError(f"{path.name}: {key} must be under [train] or [grid]")
        raise SpecError(f"{path.name}: unknown key {key!r}; the keys are {', '.join(TOP_LEVEL)}")
    return data


def _section(data: Mapping[str, Any], name: str, where: str) -> dict[str, Any]:
    """A [train] or [grid] table, dotted keys (query.total-labels = ...) flattened."""
    table = data.get(name, {})
    if not isinstance(table, Mapping):
        raise SpecError(f"{where}: {name} must be a table ([{name}])")
    flat: dict[str, Any] = {}
    for key, value in table.items():
        # env-kwargs may be a TOML table; any other table is a dotted key's section.
        if isinstance(value, Mapping) and key.replace("_", "-") != "env-kwargs":
            inner = _section({name: value}, name, where)
            flat.update({f"{key}.{k}": v for k, v in inner.items()})
        else:
            flat[key] = value
    return flat


def _flag_item(text: str, option: str, many: bool) -> tuple[str, Any]:
    """``KEY=VALUE`` (``KEY=V1,V2`` or ``KEY=[...]`` when ``many``) from a flag."""
    key, sep, raw = text.partition("=")
    if not sep or not key:
        raise SpecError(f"{option} {text!r}: expected KEY={'V1,V2' if many else 'VALUE'}")
    if many and not raw.lstrip().startswith("["):
        return key, [_literal(part.strip()) for part in raw.split(",")]
    return key, _literal(raw.strip())


def _literal(text: str) -> Any:
    """A flag value: a TOML literal (200, 0.1, inf, true, [64, 64], "x"), else the text."""
    try:
        return tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        return text


def _take(into: dict[str, Any], other: dict[str, Any], key: str, value: Any) -> None:
    """Put a flag's key into one section (where the spec had it, if it did), out of the other."""

    def same(k: str) -> bool:
        return k.removeprefix("--").replace("_", "-") == key.removeprefix("--").replace("_", "-")

    for old in [k for k in other if same(k)]:
        del other[old]
    into[next((k for k in into if same(k)), key)] = value


def build_spec(
    train: Mapping[str, Any],
    grid: Mapping[str, Any],
    seeds: Any = None,
    setup: Any = (),
    where: str = "rlhf sweep",
) -> Spec:
    """Check every key and value; the seeds become the grid's last axis ``seed``."""
    fixed: dict[str, Any] = {}
    for key, value in train.items():
        path = resolve_key(key, f"{where} [train]")
        fixed[path] = _typed(path, value, f"{where} [train] {key}")
    axes: dict[str, tuple[Any, ...]] = {}
    for key, values in grid.items():
        path = resolve_key(key, f"{where} [grid]")
        if path in fixed:
            raise SpecError(f"{where}: {key} is both in [train] and in [grid]")
        if not isinstance(values, list) or not values:
            raise SpecError(f"{where} [grid] {key} must be a non-empty list of values")
        typed = tuple(_typed(path, v, f"{where} [grid] {key}") for v in values)
        if len(set(map(repr, typed))) < len(typed):
            raise SpecError(f"{where} [grid] {key} lists a value twice")
        axes[path] = typed
    if seeds is not None:
        if "seed" in fixed or "seed" in axes:
            raise SpecError(f"{where}: seeds and seed are both given; keep one")
        ok = isinstance(seeds, list) and seeds and all(type(s) is int for s in seeds)
        if not ok or len(set(seeds)) < len(seeds):
            raise SpecError(f"{where}: seeds must be a non-empty list of different integers")
        axes["seed"] = tuple(seeds)
    if fixed.get("feedback") == "human" or "human" in axes.get("feedback", ()):
        raise SpecError(f"{where}: feedback human needs a person; a sweep uses synthetic")
    if not isinstance(setup, list | tuple) or not all(isinstance(s, str) for s in setup):
        raise SpecError(f"{where}: setup must be a list of module or module:function names")
    return Spec(tuple(fixed.items()), tuple(axes.items()), tuple(setup))


def _typed(path: str, value: Any, where: str) -> Any:
    """``value`` as the config holds it (a list becomes a tuple), or a one-line error."""
    if path == "env_kwargs" and isinstance(value, Mapping):
        value = json.dumps(value, sort_keys=True)
    try:
        cfg = Config.from_dict(nested({path: value}))
    except ConfigError:
        raise SpecError(
            f"{where}: {value!r} is not a value it takes (see rlhf train --help)"
        ) from None
    for part in path.split("."):
        cfg = getattr(cfg, part)
    return cfg


def nested(settings: Mapping[str, Any]) -> dict[str, Any]:
    """{"query.total_labels": 200} -> {"query": {"total_labels": 200}}: Config.from_dict's form."""
    data: dict[str, Any] = {}
    for path, value in settings.items():
        node = data
        *sections, name = path.split(".")
        for section in sections:
            node = node.setdefault(section, {})
        node[name] = list(value) if isinstance(value, tuple) else value
    return data
