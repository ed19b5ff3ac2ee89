"""The documentation: the generated command reference lists every flag ``--help`` has, with the
text ``--help`` shows; every subcommand has its page; the README is a short front door whose links
all lead somewhere. ``scripts/test.sh`` builds the site itself (``mkdocs build --strict``: no
broken link, anchor or page), so that is not done twice here."""

from __future__ import annotations

import dataclasses
import importlib.util
import re
import sys
import typing
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import pytest

from rlhf.cli import COMMANDS, known_flags
from rlhf.config import Config
from rlhf.config import paths as config_paths

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
MARKER = re.compile(r"<!--\s*rlhf:flags\s+([a-z-]+)\s*-->")


@pytest.fixture(scope="module")
def hook() -> ModuleType:
    """docs/hooks/reference.py, the MkDocs hook that writes the reference."""
    spec = importlib.util.spec_from_file_location("rlhf_docs_hook", DOCS / "hooks" / "reference.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while being built
    spec.loader.exec_module(module)
    return module


def _listed(markdown: str) -> set[str]:
    """The flags a generated reference lists: each entry's term is its flag(s) in code."""
    terms = re.findall(r'^<span id="[^"]+"></span>(.+)$', markdown, re.MULTILINE)
    return {flag for term in terms for flag in re.findall(r"`(--[^` ]+)", term)}


def test_the_train_reference_lists_every_flag_of_every_setting(hook: ModuleType) -> None:
    expected = {config_paths.flag(Config, path) for path in config_paths.leaf_paths(Config)}
    listed = _listed(hook.flags_markdown("train", "reference/train.md"))
    assert expected - listed == set(), "settings missing from the reference"
    negations = {f for f in listed - expected if "no-" in f}
    assert listed - expected == negations, "the reference lists flags that do not exist"
    assert listed <= known_flags(Config)


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_each_reference_has_what_help_has(hook: ModuleType, command: str) -> None:
    """Every setting's entry carries its flag and its docstring exactly as tyro reads it."""
    root = COMMANDS[command]
    settings = list(hook.settings(root))
    assert [s.path for s in settings] == config_paths.leaf_paths(root)
    positional = {s.path for s in settings if s.positional}
    named = {s.flags[0] for s in settings if not s.positional}
    assert named == {
        config_paths.flag(root, p) for p in config_paths.leaf_paths(root) if p not in positional
    }
    docstring = _tyro_docstring()
    for s in settings:
        assert s.help, f"{s.path} has no text"
        if docstring is not None:
            *sections, name = s.path.split(".")
            cls = root
            for section in sections:
                cls = _section_class(cls, section)
            assert _words(s.help) == _words(docstring(cls, name, ())), s.path
    assert _listed(hook.flags_markdown(command)) >= named


def test_every_subcommand_has_a_reference_page_and_no_page_names_another() -> None:
    marked = {
        m.group(1): page
        for page in (DOCS / "reference").glob("*.md")
        for m in MARKER.finditer(page.read_text())
    }
    assert set(marked) == set(COMMANDS)
    nav = (ROOT / "mkdocs.yml").read_text()
    for page in marked.values():
        assert f"reference/{page.name}" in nav, f"{page.name} is not in mkdocs.yml's nav"


def test_the_rooms_table_names_every_room(hook: ModuleType) -> None:
    table = hook.rooms_markdown()
    rooms = sorted(p.parent.name for p in (ROOT / "rlhf").glob("*/__init__.py"))
    for room in rooms:
        assert f"| `{room}/` |" in table


def test_the_readme_is_a_short_front_door_whose_links_lead_somewhere() -> None:
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 250, "the README is the front door: move detail into docs/"
    targets = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", readme)
    local = [t for t in targets if "://" not in t]
    assert local, "the README links into docs/"
    for target in local:
        assert (ROOT / target).exists(), f"README links to {target}, which does not exist"
    assert "docs/results/index.md" in local


def _tyro_docstring() -> Callable[[type, str, tuple[()]], str | None] | None:
    """tyro's own field-docstring reader (what ``--help`` prints), if this tyro still has it."""
    try:
        from tyro._docstrings import get_field_docstring
    except ImportError:
        return None
    return get_field_docstring


def _section_class(cls: type, name: str) -> type:
    hint = typing.get_type_hints(cls, include_extras=True)[name]
    bare = typing.get_args(hint)[0] if typing.get_origin(hint) is typing.Annotated else hint
    assert dataclasses.is_dataclass(bare)
    return bare


def _words(text: str | None) -> list[str]:
    return (text or "").split()
