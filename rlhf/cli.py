"""Command line: ``rlhf train`` and ``rlhf serve`` (also ``python -m rlhf``).

Every user error (bad flag, wrong env id, out-of-range value) is one line on stderr and exit code
2, never a traceback.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import sys
from dataclasses import dataclass, field
from typing import Annotated

import tyro

from rlhf.config import Config, ConfigError, VideoConfig, WebConfig


@dataclass(frozen=True)
class Serve:
    """rlhf serve: label an existing run's pending pairs in the browser, without training."""

    run: str
    """The run directory, e.g. runs/HalfCheetah-v5__human__1__20261122-101500."""
    web: Annotated[WebConfig, tyro.conf.OmitArgPrefixes] = field(default_factory=WebConfig)
    """Web server settings: --host, --port, --token, --open-browser."""
    video: VideoConfig = field(default_factory=VideoConfig)
    """Video rendering settings."""


Command = (
    Annotated[Config, tyro.conf.subcommand("train", prefix_name=False)]
    | Annotated[Serve, tyro.conf.subcommand("serve", prefix_name=False)]
)


def fail(message: str) -> None:
    """Print ``rlhf: error: message`` on one line and exit with code 2."""
    print(f"rlhf: error: {message}", file=sys.stderr)
    raise SystemExit(2)


def parse(argv: list[str]) -> Config | Serve:
    """Parse ``argv`` with tyro, condensing its multi-line error box into one line."""
    captured = io.StringIO()
    try:
        with contextlib.redirect_stderr(captured):
            return tyro.cli(Command, args=argv, prog="rlhf", console_outputs=True)
    except SystemExit as exc:
        if exc.code in (0, None):
            raise
        fail(_one_line(captured.getvalue()))
    raise AssertionError("unreachable")


def _one_line(text: str) -> str:
    """The gist of a tyro error box: its body lines joined, without the box and the help text."""
    lines = []
    for raw in text.splitlines():
        if raw.lstrip().startswith(("╭", "╰")):  # box borders carry only the title
            continue
        line = re.sub(r"[│┃─━]+", " ", raw).strip()
        if line.startswith(("Argument helptext", "For full helptext")):
            break
        if line and not line.lower().startswith("usage:"):
            lines.append(line)
    gist = re.sub(r"\s+", " ", " ".join(lines)).strip()
    return (gist or "invalid command line") + " (see rlhf train --help)"


def main(argv: list[str] | None = None) -> None:
    """Entry point of the ``rlhf`` console script."""
    args = sys.argv[1:] if argv is None else argv
    command = parse(args)
    os.environ.setdefault("MUJOCO_GL", "egl" if not os.environ.get("DISPLAY") else "glfw")
    try:
        if isinstance(command, Serve):
            _serve(command)
        else:
            from rlhf.loop import run

            run(command)
    except ConfigError as exc:
        fail(str(exc))
    except KeyboardInterrupt:
        print("rlhf: interrupted; every stored label is kept", file=sys.stderr)
        raise SystemExit(130) from None


def _serve(command: Serve) -> None:
    from rlhf.run_dir import open_run_dir

    command.web.validate()
    run_dir = open_run_dir(command.run)
    from rlhf.server import serve_run

    serve_run(run_dir.root, command.web, command.video)
