"""Command lines the app prints for a person to run, in the form that runs from where they are.

``scripts/run.sh`` installs ``rlhf`` and ``tensorboard`` into ``.venv/bin`` without touching the
shell's PATH, so a bare ``rlhf train --resume ...`` printed after such a run would answer "command
not found". Every printed command goes through :func:`program`, which says the bare name only when
the shell would find this very program under it, and the venv's path otherwise. A missing extra is
named with :func:`install_extra`: the project's own setup script where this is a checkout (the
package index has an unrelated project called ``rlhf``, so ``pip install 'rlhf[data]'`` would
install someone else's code).
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import sys
from importlib import metadata
from pathlib import Path

CHECKOUT = Path(__file__).resolve().parents[2]
"""The folder above the package: a clone of the project when ``scripts/setup.sh`` is in it."""


def short_path(path: Path | str) -> str:
    """PATH as short as it can be said from the current directory, quoted for a shell."""
    full = Path(os.path.abspath(path))
    try:
        text = os.fspath(full.relative_to(Path.cwd()))
    except ValueError:
        text = os.fspath(full)
    return shlex.quote(text)


def program(name: str) -> str:
    """How a person calls the console script NAME (``rlhf``, ``tensorboard``) from this shell.

    The bare name when the shell's PATH finds the one beside this Python (an activated venv, a
    global install); else the path of the one beside this Python, relative where it is short.
    """
    beside = Path(sys.executable).parent / name  # the venv's bin/, without resolving python
    if not beside.exists():
        return name
    found = shutil.which(name)
    if found is not None and os.path.samefile(found, beside):
        return name
    text = short_path(beside)
    return text if "/" in text else f"./{text}"


def install_extra(extra: str) -> str:
    """The command that installs this project's EXTRA (``data``, ``sweep``, ``goals``)."""
    setup = CHECKOUT / "scripts" / "setup.sh"
    if setup.exists():
        text = short_path(setup)
        return f"{text if '/' in text else './' + text} {extra}"
    return "pip install " + " ".join(shlex.quote(r) for r in _requirements(extra))


def missing_extra(what: str, extra: str) -> str:
    """One line for WHAT (``datasets need pyarrow``) missing, with the command that installs it."""
    return f"{what}, which is not installed: {install_extra(extra)}"


def _requirements(extra: str) -> list[str]:
    """The requirements of EXTRA as the installed package's metadata lists them."""
    marker = re.compile(rf"""^(?P<req>[^;]+);\s*extra\s*==\s*["']{re.escape(extra)}["']\s*$""")
    found = (marker.match(r) for r in metadata.requires("rlhf") or [])
    return [m["req"].strip() for m in found if m is not None]
