"""The label store's per-reader protocols (``rlhf/store/protocols.py``): LabelStore satisfies each
one, and each reader's modules call only the store methods its protocol lists."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import pytest

from rlhf.store import LabelStore
from rlhf.store.protocols import MetaReader, RenderStore, ServerStore, TrainerStore

ROOT = Path(__file__).resolve().parents[2] / "rlhf"

PROTOCOLS = [MetaReader, TrainerStore, ServerStore, RenderStore]

# Which modules read the store through which protocol.
READERS: dict[type, list[Path]] = {
    TrainerStore: [
        *sorted((ROOT / "run").glob("*.py")),
        ROOT / "feedback" / "sources.py",
        ROOT / "feedback" / "human.py",
        ROOT / "feedback" / "policy_clips.py",
    ],
    ServerStore: sorted((ROOT / "server").glob("*.py")),
    RenderStore: sorted((ROOT / "render").glob("*.py")),
}

STORE_NAMES = {"store", "_store"}


def protocol_methods(proto: type) -> set[str]:
    return {
        name
        for name, value in vars(proto).items()
        if not name.startswith("_") and inspect.isfunction(value)
    }


def store_calls(source: str) -> set[str]:
    """Methods used as ``store.<m>`` or ``<anything>.store.<m>`` (also ``_store``): called, or
    handed on (``cleanup.callback(t.prefs.store.close)``)."""
    used: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Attribute):
            continue
        owner = node.value
        name = owner.id if isinstance(owner, ast.Name) else getattr(owner, "attr", None)
        if name in STORE_NAMES:
            used.add(node.attr)
    return used


@pytest.mark.parametrize("proto", PROTOCOLS, ids=lambda p: p.__name__)
def test_label_store_satisfies_protocol(proto: type) -> None:
    methods = protocol_methods(proto)
    assert methods, f"{proto.__name__} lists no methods"
    for name in sorted(methods):
        assert callable(getattr(LabelStore, name, None)), f"LabelStore has no {name}"
        want = inspect.signature(getattr(proto, name))
        have = inspect.signature(getattr(LabelStore, name))
        assert list(want.parameters) == list(have.parameters), name
        for p_want, p_have in zip(want.parameters.values(), have.parameters.values(), strict=True):
            assert p_want.kind == p_have.kind, f"{name}({p_want.name})"
            assert p_want.default == p_have.default, f"{name}({p_want.name}) default"


@pytest.mark.parametrize("proto", list(READERS), ids=lambda p: p.__name__)
def test_readers_call_only_their_protocol(proto: type) -> None:
    allowed = protocol_methods(proto)
    wider = {
        f"{path.relative_to(ROOT.parent)}: store.{name}"
        for path in READERS[proto]
        for name in store_calls(path.read_text())
        if name not in allowed
    }
    assert not wider, f"calls outside {proto.__name__} (add them there first): {sorted(wider)}"


def test_readers_use_every_protocol_method() -> None:
    """A protocol lists nothing its reader no longer calls (kept narrow in both directions)."""
    for proto, paths in READERS.items():
        called = set().union(*(store_calls(p.read_text()) for p in paths))
        assert protocol_methods(proto) <= called, proto.__name__


def test_store_calls_sees_both_spellings() -> None:
    src = "store.a()\nstate.store.b(1)\nself._store.c()\nf(t.store.e)\nother.d()\n"
    assert store_calls(src) == {"a", "b", "c", "e"}
