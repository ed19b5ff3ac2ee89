"""The store's meta keys live in one module (rlhf/store/meta.py) and nowhere else: no module under
rlhf/ names a key with a string of its own, and each key says what its value is."""

from __future__ import annotations

import ast
from pathlib import Path

from rlhf.core.status import STATUS_KEY
from rlhf.store import meta

PACKAGE = Path(__file__).resolve().parents[2] / "rlhf"
META_CALLS = {"get_meta", "set_meta"}


def _literal_keys(source: str) -> list[int]:
    """Lines where ``get_meta``/``set_meta`` is called with a string literal (or f-string) key."""
    lines = []
    for node in ast.walk(ast.parse(source)):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            continue
        if node.func.attr not in META_CALLS:
            continue
        key = node.args[0] if node.args else next((k.value for k in node.keywords), None)
        literal = isinstance(key, ast.Constant) and isinstance(key.value, str)
        if literal or isinstance(key, ast.JoinedStr):
            lines.append(node.lineno)
    return lines


def test_no_module_names_a_meta_key_with_a_string_literal() -> None:
    found = [
        f"{path.relative_to(PACKAGE.parent)}:{line}"
        for path in sorted(PACKAGE.rglob("*.py"))
        for line in _literal_keys(path.read_text())
    ]
    assert not found, f"use a key from rlhf/store/meta.py: {found}"


def test_the_check_finds_a_literal_key() -> None:
    """The negative control: the check above is not blind."""
    source = 'store.set_meta("run_name", 1)\nstore.get_meta(f"x{y}")\nstore.get_meta(KEY)\n'
    assert _literal_keys(source) == [1, 2]


def _documented_keys() -> dict[str, str]:
    """Constant name -> the docstring under it, for every ``*_META`` constant of the module."""
    body = ast.parse(Path(meta.__file__).read_text()).body
    found = {}
    for node, after in zip(body, [*body[1:], None], strict=True):
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
            name = node.targets[0].id
            doc = after.value.value if isinstance(after, ast.Expr) else None
            found[name] = doc if isinstance(doc, str) else ""
    return found


def test_every_key_is_a_distinct_documented_string() -> None:
    keys = {name: getattr(meta, name) for name in dir(meta) if name.endswith("_META")}
    assert len(keys) == 14
    assert all(isinstance(k, str) and k for k in keys.values())
    assert len(set(keys.values())) == len(keys), keys  # no two names for one key
    documented = _documented_keys()
    assert set(documented) == set(keys)
    assert all(len(documented[name]) > 40 for name in keys), "say what the value is, who uses it"
    assert meta.STATUS_META == STATUS_KEY == "trainer_status"  # core's key, named here too
