"""Field paths of nested config dataclasses: the flag each one has, and rebuilding from a dict.

A path names a field from the root, e.g. ``query.total_labels``. Its flag follows tyro's rules: a
section annotated with ``tyro.conf.OmitArgPrefixes`` adds no prefix (``ppo.gamma`` is ``--gamma``),
the others add ``<section>.``; underscores become hyphens. Reading the annotations here, rather than
keeping a list of names, is what keeps error messages and ``--help`` from drifting apart.
"""

from __future__ import annotations

import dataclasses
import functools
import types
import typing
from collections.abc import Mapping
from typing import Annotated, Any, Literal, TypeVar, Union, get_args, get_origin

import tyro

T = TypeVar("T")


class UnreadableConfig(ValueError):
    """A stored configuration does not fit the dataclasses; the message is one line."""


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls, include_extras=True)


def _bare(hint: Any) -> Any:
    return get_args(hint)[0] if get_origin(hint) is Annotated else hint


def _omits_prefix(hint: Any) -> bool:
    return get_origin(hint) is Annotated and tyro.conf.OmitArgPrefixes in hint.__metadata__


def _section(hint: Any) -> type | None:
    bare = _bare(hint)
    return bare if isinstance(bare, type) and dataclasses.is_dataclass(bare) else None


def flag(root: type, path: str) -> str:
    """The flag of the field at ``path`` under ``root``; KeyError if there is no such field."""
    *sections, name = path.split(".")
    cls, prefix = root, []
    for section in sections:
        hint = _hints(cls)[section]
        if not _omits_prefix(hint):
            prefix.append(section)
        sub = _section(hint)
        if sub is None:
            raise KeyError(f"{path}: {section} is not a section")
        cls = sub
    if name not in _hints(cls) or _section(_hints(cls)[name]) is not None:
        raise KeyError(f"{root.__name__} has no setting {path!r}")
    return "--" + ".".join([*prefix, _arg_name(_hints(cls)[name]) or name]).replace("_", "-")


def _arg_name(hint: Any) -> str | None:
    """The name a ``tyro.conf.arg(name=...)`` gives a field's flag, if any."""
    if get_origin(hint) is not Annotated:
        return None
    names = [getattr(m, "name", None) for m in hint.__metadata__]
    return next((n for n in names if isinstance(n, str)), None)


def leaf_paths(root: type) -> list[str]:
    """Every setting's path under ``root``, sections expanded, in declaration order."""
    paths: list[str] = []
    for f in dataclasses.fields(root):
        sub = _section(_hints(root)[f.name])
        paths += [f"{f.name}.{p}" for p in leaf_paths(sub)] if sub else [f.name]
    return paths


def is_bool(root: type, path: str) -> bool:
    """Whether the setting is a flag pair (``--x`` / ``--no-x``) on the command line."""
    *sections, name = path.split(".")
    cls: type | None = root
    for section in sections:
        cls = _section(_hints(cls)[section])
    return _bare(_hints(cls)[name]) is bool


def get(obj: Any, path: str) -> Any:
    for name in path.split("."):
        obj = getattr(obj, name)
    return obj


def build(cls: type[T], data: Mapping[str, Any]) -> T:
    """``cls`` from a dict such as :func:`dataclasses.asdict` wrote; missing keys keep defaults.

    Raises:
        UnreadableConfig: unknown keys (all named at once) or a value of the wrong type.
    """
    unknown: list[str] = []
    built = _build(cls, data, "", unknown)
    if unknown:
        raise UnreadableConfig(f"unknown settings {', '.join(sorted(unknown))}")
    return built


def _build(cls: type[T], data: Any, prefix: str, unknown: list[str]) -> T:
    if not isinstance(data, Mapping):
        raise UnreadableConfig(f"{prefix.rstrip('.') or 'the configuration'} is not an object")
    hints, kwargs = _hints(cls), {}
    names = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    for key, value in data.items():
        path = prefix + str(key)
        if key not in names:
            unknown.append(path)
        elif (sub := _section(hints[key])) is not None:
            kwargs[key] = _build(sub, value, path + ".", unknown)
        else:
            ok, kwargs[key] = _convert(value, _bare(hints[key]))
            if not ok:
                raise UnreadableConfig(f"{path} has a value this rlhf cannot use: {value!r}")
    return cls(**kwargs)


def _convert(value: Any, hint: Any) -> tuple[bool, Any]:
    """(whether ``value`` fits ``hint``, the value as the dataclass holds it)."""
    origin = get_origin(hint)
    if origin in (Union, types.UnionType):
        for option in get_args(hint):
            ok, converted = _convert(value, option)
            if ok:
                return True, converted
        return False, None
    if origin is Literal:
        return value in get_args(hint), value
    if origin is tuple:  # JSON has only lists; the dataclasses hold tuples (hashable, frozen)
        if not isinstance(value, list | tuple):
            return False, None
        items = [_convert(v, get_args(hint)[0]) for v in value]
        return all(ok for ok, _ in items), tuple(v for _, v in items)
    if hint is type(None):
        return value is None, None
    if hint is float:  # a float field may hold an int (5 for 5.0); json reads inf as Infinity
        ok = isinstance(value, int | float) and not isinstance(value, bool)
        return ok, float(value) if ok else None
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool), value
    return isinstance(value, hint), value
