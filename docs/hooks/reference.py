"""MkDocs hook: the parts of the docs that are generated from the code, so they cannot drift.

A page holds a marker, and the build replaces it:

``<!-- rlhf:flags COMMAND -->``
    Every setting of ``rlhf COMMAND`` (a key of ``rlhf.cli.COMMANDS``): its flag as
    ``rlhf COMMAND --help`` spells it (``rlhf.config.paths``), its value's form, its default and
    its text. The text is the field's docstring read by ``docstring_parser``, the reader tyro
    itself uses for ``--help``, cleaned as ``rlhf.cli`` cleans it; so the docs and ``--help``
    say the same thing, and a new field is documented the moment it has a docstring.
``<!-- rlhf:rooms -->``
    The rooms of the package and what each may import: the ``ROOMS`` table that
    ``tests/test_structure.py`` enforces, read from that file (never imported), with each room's
    modules as they are on disk.

An unknown marker, command or a field without a docstring fails the build (``mkdocs build
--strict`` runs in ``scripts/test.sh``); ``tests/test_docs.py`` checks the flags against
``rlhf.config.paths``.
"""

from __future__ import annotations

import ast
import dataclasses
import html
import inspect
import posixpath
import re
import shlex
import types
import typing
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any, Literal, Union, get_args, get_origin

ROOT = Path(__file__).resolve().parents[2]
MARKER = re.compile(r"<!--\s*rlhf:(flags|rooms)\s*([a-z-]*)\s*-->")
FLAG = re.compile(r"--[a-z][a-z0-9-]*(?:\.[a-z][a-z0-9-]*)*")
# What a docstring's text links or marks up: a `code span` (kept as it is), a flag, or a page of
# these docs named by its path from the repository (docs/results/x.md).
TOKEN = re.compile(r"`[^`\n]+`|" + FLAG.pattern + r"|docs/[a-z0-9_/-]+\.md")


@dataclasses.dataclass(frozen=True)
class Setting:
    """One command-line setting as ``--help`` shows it."""

    path: str  # the field's dotted path from the command's dataclass, e.g. query.total_labels
    flags: tuple[str, ...]  # e.g. ("--query.total-labels",); a bool: ("--x", "--no-x")
    metavar: str  # the value's form ("INT", "{a,b}"); "" for a bool
    default: str  # as a user would type it; "required" when there is none
    help: str  # the field's docstring, one paragraph per blank line
    positional: bool = False
    repeatable: bool = False


@dataclasses.dataclass(frozen=True)
class Section:
    """A group of settings: the command's own, or a nested dataclass (``--query.*``)."""

    path: str  # "" for the command's own settings, else e.g. "query"
    title: str  # the section field's docstring (tyro's group title)
    about: str  # the section class's docstring
    settings: tuple[Setting, ...]


# ----------------------------------------------------------------------------- reading the code


def commands() -> dict[str, type]:
    """``rlhf.cli.COMMANDS``: subcommand name -> the dataclass tyro parses for it."""
    from rlhf.cli import COMMANDS

    return dict(COMMANDS)


def field_docs(cls: type) -> dict[str, str]:
    """Field name -> its docstring, as tyro reads it for ``--help`` (docstring_parser)."""
    import docstring_parser

    return {
        p.arg_name: p.description
        for p in docstring_parser.parse_from_object(cls).params
        if p.description is not None
    }


def clean(text: str) -> str:
    """A docstring as one paragraph per blank-line-separated block (``rlhf.cli`` joins the lines
    of a field docstring the same way for ``--help``)."""
    blocks = re.split(r"\n\s*\n", inspect.cleandoc(text))
    return "\n\n".join(" ".join(b.split()) for b in blocks if b.strip())


def _metadata(hint: Any) -> tuple[Any, ...]:
    return hint.__metadata__ if get_origin(hint) is Annotated else ()


def _bare(hint: Any) -> Any:
    return get_args(hint)[0] if get_origin(hint) is Annotated else hint


def _is_section(hint: Any) -> bool:
    bare = _bare(hint)
    return isinstance(bare, type) and dataclasses.is_dataclass(bare)


def _metavar(hint: Any) -> str:
    """The value's form as tyro shows it, for a hint without an explicit metavar."""
    origin = get_origin(hint)
    if origin is Literal:
        choices = [str(a) for a in get_args(hint)]
        return choices[0] if len(choices) == 1 else "{" + ",".join(choices) + "}"
    if origin in (Union, types.UnionType):
        options = [a for a in get_args(hint) if a is not type(None)]
        return "|".join(_metavar(a) for a in options)
    if origin is tuple:
        inner = _metavar(get_args(hint)[0])
        return f"{inner} [{inner} ...]"
    return {int: "INT", float: "FLOAT", str: "STR", bool: ""}.get(hint, "VALUE")


def _default_text(value: Any) -> str:
    if value is dataclasses.MISSING:
        return "required"
    if isinstance(value, bool) or value is None:
        return str(value)
    if isinstance(value, float) and value in (float("inf"), float("-inf")):
        return str(value)
    if isinstance(value, tuple):
        return " ".join(_default_text(v) for v in value) if value else "none"
    if isinstance(value, str):
        return shlex.quote(value)
    return str(value)


def sections(root: type) -> list[Section]:
    """Every setting of the command whose dataclass is ``root``, grouped as ``--help`` groups
    them: the command's own first, then each nested section (recursively), in declaration
    order."""
    from rlhf.config import paths as config_paths

    out: list[Section] = []

    def walk(cls: type, prefix: str, title: str) -> None:
        hints = typing.get_type_hints(cls, include_extras=True)
        docs = field_docs(cls)
        own: list[Setting] = []
        nested: list[tuple[type, str, str]] = []
        for f in dataclasses.fields(cls):
            path = prefix + f.name
            hint = hints[f.name]
            doc = docs.get(f.name)
            if doc is None:
                raise ValueError(f"{cls.__name__}.{f.name} has no docstring: --help says nothing")
            if _is_section(hint):
                nested.append((_bare(hint), path + ".", clean(doc)))
                continue
            meta = _metadata(hint)
            bare = _bare(hint)
            metavar = next((m.metavar for m in meta if getattr(m, "metavar", None)), None)
            repeatable = any(m is _tyro_conf().UseAppendAction for m in meta)
            positional = any(m is _tyro_conf().Positional for m in meta)
            if f.default is not dataclasses.MISSING:
                default = f.default
            elif f.default_factory is not dataclasses.MISSING:
                default = f.default_factory()
            else:
                default = dataclasses.MISSING
            if positional:
                flags = (metavar or _metavar(bare),)
                metavar = ""
            else:
                flag = config_paths.flag(root, path)
                flags = (flag,)
                if config_paths.is_bool(root, path):
                    head, dot, leaf = flag[2:].rpartition(".")
                    flags = (flag, f"--{head}{dot}no-{leaf}")
                    metavar = ""
                elif metavar is None:
                    metavar = _metavar(bare)
                elif get_origin(_strip_none(bare)) is tuple and not repeatable:
                    metavar = f"{metavar} [{metavar} ...]"
            own.append(
                Setting(
                    path=path,
                    flags=flags,
                    metavar=metavar,
                    default=_default_text(default),
                    help=clean(doc),
                    positional=positional,
                    repeatable=repeatable,
                )
            )
        about = clean(cls.__doc__ or "") if prefix else ""
        if own:
            out.append(Section(prefix.rstrip("."), title, about, tuple(own)))
        for sub, sub_prefix, sub_title in nested:
            walk(sub, sub_prefix, sub_title)

    walk(root, "", clean(root.__doc__ or ""))
    return out


def _strip_none(hint: Any) -> Any:
    if get_origin(hint) in (Union, types.UnionType):
        options = [a for a in get_args(hint) if a is not type(None)]
        return options[0] if len(options) == 1 else hint
    return hint


def _tyro_conf() -> Any:
    import tyro

    return tyro.conf


def settings(root: type) -> Iterator[Setting]:
    for section in sections(root):
        yield from section.settings


# ----------------------------------------------------------------------------- writing Markdown


def _escape(text: str) -> str:
    """Plain text as Markdown that shows it as is (``--help`` has no markup)."""
    text = html.escape(text, quote=False)
    return re.sub(r"([\\`*_\[\]|#])", r"\\\1", text)


def _anchor(setting: Setting) -> str:
    """The id of a setting's entry: ``--query.total-labels`` -> ``query.total-labels``; a
    positional argument's is its field's name."""
    if setting.positional:
        return setting.path.replace("_", "-")
    return setting.flags[0].lstrip("-")


def _prose(text: str, known: dict[str, str], page: str) -> str:
    """``text`` escaped, each flag in it as code, linked to its entry when it is this
    command's (``known``: flag, negations included -> anchor), and each docs page it names
    linked from ``page`` (the path of the page being built, relative to docs/)."""
    parts, last = [], 0
    for m in TOKEN.finditer(text):
        parts.append(_escape(text[last : m.start()]))
        token = m.group(0)
        if token.startswith("`"):
            parts.append(token)
        elif token.startswith("docs/"):
            target = posixpath.relpath(token.removeprefix("docs/"), posixpath.dirname(page))
            parts.append(f"[{_escape(token)}]({target})")
        else:
            code = f"`{token}`"
            parts.append(f"[{code}](#{known[token]})" if token in known else code)
        last = m.end()
    parts.append(_escape(text[last:]))
    return "".join(parts)


def flags_markdown(name: str, page: str = "reference/index.md") -> str:
    """The reference of ``rlhf NAME`` on ``page`` (its path under docs/): one definition list
    per section."""
    table = commands()
    if name not in table:
        raise ValueError(f"rlhf:flags {name!r}: no such command; known: {', '.join(table)}")
    found = sections(table[name])
    known = {f: _anchor(s) for sec in found for s in sec.settings for f in s.flags}
    lines: list[str] = []
    for sec in found:
        if not sec.path and len(found) > 1:
            lines += [f"### options {{#{name}-options}}", ""]
        if sec.path:
            flags = [s.flags[0] for s in sec.settings]
            shared = "--" + sec.path.replace("_", "-") + "."
            prefix = f"`{shared}*`" if all(f.startswith(shared) for f in flags) else "no prefix"
            lines += [f"### {sec.path} options {{#{name}-{sec.path.replace('.', '-')}}}", ""]
            lines += [f"{_prose(sec.title, known, page)} Flags: {prefix}.", ""]
            if sec.about and sec.about != sec.title:
                lines += [_prose(sec.about, known, page), ""]
        for s in sec.settings:
            term = ", ".join(f"`{f}`" for f in s.flags)
            if s.metavar:
                term = f"`{s.flags[0]} {s.metavar}`"
            extra = " (repeatable)" if s.repeatable else ""
            default = f"Default: `{s.default}`." if s.default != "required" else "Required."
            if s.positional:
                term = f"`{s.flags[0]}` (positional)"
                default = "Required." if s.default == "required" else f"Default: `{s.default}`."
            lines.append(f'<span id="{_anchor(s)}"></span>{term}{extra}')
            paragraphs = [_prose(p, known, page) for p in s.help.split("\n\n")]
            paragraphs[-1] += f" {default}"
            lines.append(":   " + "\n\n    ".join(paragraphs))
            lines.append("")
    return "\n".join(lines).rstrip() + "\n"


def rooms() -> dict[str, tuple[str, set[str]]]:
    """``ROOMS`` of tests/test_structure.py, read as a literal (the test file is not imported)."""
    tree = ast.parse((ROOT / "tests" / "test_structure.py").read_text())
    for node in tree.body:
        target = getattr(node, "target", None) or next(iter(getattr(node, "targets", [])), None)
        if isinstance(target, ast.Name) and target.id == "ROOMS" and node.value is not None:
            return ast.literal_eval(node.value)
    raise ValueError("tests/test_structure.py has no ROOMS table")


def rooms_markdown() -> str:
    lines = ["| room | what it holds | may import | modules |", "| --- | --- | --- | --- |"]
    for room, (purpose, allowed) in rooms().items():
        folder = ROOT / "rlhf" / room
        modules = sorted(p.stem for p in folder.glob("*.py") if p.stem != "__init__")
        imports = ", ".join(f"`{r}`" for r in sorted(allowed)) or "nothing of rlhf"
        names = ", ".join(f"`{m}`" for m in modules)
        lines.append(f"| `{room}/` | {_escape(purpose)} | {imports} | {names} |")
    return "\n".join(lines) + "\n"


def render(markdown: str, page: str) -> str:
    """``markdown`` (of ``page``, its path under docs/) with every marker replaced by what it
    stands for."""

    def replace(m: re.Match[str]) -> str:
        return flags_markdown(m.group(2), page) if m.group(1) == "flags" else rooms_markdown()

    return MARKER.sub(replace, markdown)


def on_page_markdown(markdown: str, page: Any, **_: Any) -> str:
    """MkDocs event: fill in a page's markers."""
    return render(markdown, page.file.src_uri)
