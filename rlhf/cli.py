"""Command line: ``rlhf train``, ``serve``, ``sweep``, ``runs``, ``export``, ``import``,
``reward fit`` (also ``python -m rlhf``).

Every user error (bad flag, wrong env id, out-of-range value) is one line on stderr and exit code
2, never a traceback.
"""

from __future__ import annotations

import contextlib
import difflib
import inspect
import io
import os
import re
import sqlite3
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Annotated, TypeVar

import tyro

from rlhf.commands.record import Record
from rlhf.commands.runs import Export, Import, Runs
from rlhf.config import Config, ConfigError, VideoConfig, WebConfig
from rlhf.config import paths as config_paths
from rlhf.reward.fit import RewardCommand
from rlhf.sweep.command import Sweep

T = TypeVar("T")


def _join_docstring_lines() -> None:
    """Make ``--help`` show each field docstring as one paragraph.

    tyro joins the lines of a docstring only where a line starts with a letter, and it dedents
    afterwards, so the indented continuation lines of a field docstring keep their breaks and the
    help shows ragged half-lines. Cleaning the indentation first fixes that. If a later tyro
    moves this function, the help keeps its breaks and nothing else changes.
    """
    strings = getattr(tyro, "_strings", None)
    original = getattr(strings, "remove_single_line_breaks", None)
    if original is None or getattr(original, "rlhf_cleandoc", False):
        return

    def cleaned(text: str) -> str:
        return original(inspect.cleandoc(text))

    cleaned.rlhf_cleandoc = True  # type: ignore[attr-defined]
    strings.remove_single_line_breaks = cleaned  # type: ignore[union-attr]


_join_docstring_lines()


@dataclass(frozen=True)
class Serve:
    """rlhf serve: label an existing run's pending pairs in the browser, without training."""

    run: Annotated[str, tyro.conf.arg(metavar="DIR")]
    """The run directory, e.g. runs/HalfCheetah-v5__human__1__20261122-101500."""
    web: Annotated[WebConfig, tyro.conf.OmitArgPrefixes] = field(default_factory=WebConfig)
    """Web server settings: --host, --port, --token, --open-browser."""
    video: VideoConfig = field(default_factory=VideoConfig)
    """Video rendering settings."""

    def validate(self) -> None:
        self.web.validate()
        self.video.validate()


COMMANDS: dict[str, type] = {
    "train": Config,
    "serve": Serve,
    "sweep": Sweep,
    "runs": Runs,
    "export": Export,
    "import": Import,
    "reward": RewardCommand,
    "record": Record,
}

Command = (
    Annotated[Config, tyro.conf.subcommand("train", prefix_name=False)]
    | Annotated[Serve, tyro.conf.subcommand("serve", prefix_name=False)]
    | Annotated[Sweep, tyro.conf.subcommand("sweep", prefix_name=False)]
    | Annotated[Runs, tyro.conf.subcommand("runs", prefix_name=False)]
    | Annotated[Export, tyro.conf.subcommand("export", prefix_name=False)]
    | Annotated[Import, tyro.conf.subcommand("import", prefix_name=False)]
    | Annotated[RewardCommand, tyro.conf.subcommand("reward", prefix_name=False)]
    | Annotated[Record, tyro.conf.subcommand("record", prefix_name=False)]
)


def fail(message: str, code: int = 2) -> None:
    """Print ``rlhf: error: message`` on one line and exit with ``code`` (2: the user's input)."""
    print(f"rlhf: error: {message}", file=sys.stderr)
    raise SystemExit(code)


def parse(argv: list[str]) -> Config | Serve | Sweep | Runs | Export | Import | RewardCommand:
    """The command ``argv`` asks for, validated; any user error exits through :func:`fail`."""
    if argv and not argv[0].startswith("-"):
        if argv[0] not in COMMANDS:
            fail(f"unknown command {argv[0]!r}; choose one of: {', '.join(COMMANDS)}")
        _refuse_unknown_flags(argv[0], argv[1:])
    see = f"rlhf {argv[0]}" if argv and argv[0] in COMMANDS else "rlhf"
    command = _tyro(Command, argv, "rlhf", see)
    try:
        if isinstance(command, Config) and command.resume is not None:
            command = _resume(argv[1:], Path(command.resume))
        # Every command checks its values here, before it reads a file or makes a directory.
        validate = getattr(command, "validate", None)
        if validate is not None:
            validate()
    except ConfigError as exc:
        fail(str(exc))
    return command


def _resume(args: list[str], root: Path) -> Config:
    """``rlhf train --resume DIR [flags]``: the stored config, with the flags that may change."""
    from rlhf.run.run_dir import read_config, resumed_config

    if root.name in ("", ".", ".."):  # "--resume ." names the run by its real directory name
        root = root.resolve()
    stored = read_config(root)
    # Parsing over the stored config makes an absent flag mean "as the run was started".
    base = replace(stored, run_name=root.name, runs_dir=str(root.parent), resume=str(root))
    given = _tyro(Config, args, "rlhf train", "rlhf train", default=base)
    return resumed_config(root, stored, given)


def _tyro(kind: object, args: list[str], prog: str, see: str, default: T | None = None) -> T:
    """Parse with tyro, condensing its multi-line error box into one line (``see``: whose help)."""
    captured = io.StringIO()
    try:
        with contextlib.redirect_stderr(captured):
            # No default= at all unless given: tyro warns that None is not a Config or a Serve.
            extra = {} if default is None else {"default": default}
            return tyro.cli(kind, args=args, prog=prog, console_outputs=True, **extra)
    except SystemExit as exc:
        if exc.code in (0, None):
            raise
        fail(f"{_one_line(captured.getvalue())} (see {see} --help)")
    raise AssertionError("unreachable")


def known_flags(root: type) -> set[str]:
    """Every flag ``rlhf <command> --help`` lists for the command whose dataclass is ``root``."""
    flags = {"-h", "--help"}
    for path in config_paths.leaf_paths(root):
        name = config_paths.flag(root, path)
        flags.add(name)
        if config_paths.is_bool(root, path):  # tyro's negation: --x -> --no-x, --a.x -> --a.no-x
            head, dot, leaf = name[2:].rpartition(".")
            flags.add(f"--{head}{dot}no-{leaf}")
    return flags


def _refuse_unknown_flags(command: str, args: list[str]) -> None:
    """One line naming an unknown flag and the closest known one (tyro prints a help fragment)."""
    known = known_flags(COMMANDS[command])
    for arg in args:
        if arg == "--":
            break
        name = arg.split("=", 1)[0]
        # tyro also accepts underscores (--env_id); so do we.
        if not name.startswith("--") or name.replace("_", "-") in known:
            continue
        guess = _closest(name.replace("_", "-"), known)
        hint = f"; did you mean {guess}?" if guess else f" (see rlhf {command} --help)"
        fail(f"unrecognized flag {name}{hint}")


def _closest(name: str, known: set[str]) -> str | None:
    """The known flag most like ``name``, whole or by its last part (--total-label finds
    --query.total-labels); None when nothing is close."""

    def score(candidate: str) -> tuple[float, float]:
        whole = difflib.SequenceMatcher(None, name, candidate).ratio()
        tail = difflib.SequenceMatcher(
            None, name[2:].rpartition(".")[2], candidate[2:].rpartition(".")[2]
        ).ratio()
        return max(whole, tail), whole

    best = max(sorted(known - {"-h"}), key=score)
    return best if score(best)[0] >= 0.75 else None


def _one_line(text: str) -> str:
    """The gist of a tyro error box: its body lines joined, without the box and the help text."""
    lines = []
    for raw in text.splitlines():
        if raw.lstrip().startswith(("╭", "╰")):  # box borders carry only the title
            continue
        line = re.sub(r"[│┃─━]+|-{3,}", " ", raw).strip()  # box rules, or dashes without a TTY
        if line.startswith(("Argument helptext", "For full helptext")):
            break
        if line and not line.lower().startswith("usage:"):
            lines.append(line)
    gist = re.sub(r"\s+", " ", " ".join(lines)).strip()
    return gist or "invalid command line"


def main(argv: list[str] | None = None) -> None:
    """Entry point of the ``rlhf`` console script."""
    args = sys.argv[1:] if argv is None else argv
    command = parse(args)
    os.environ.setdefault("MUJOCO_GL", "egl" if not os.environ.get("DISPLAY") else "glfw")
    try:
        if isinstance(command, Serve):
            _serve(command)
        elif isinstance(command, Sweep):
            from rlhf.sweep.driver import sweep_main

            sweep_main(command)
        elif isinstance(command, Runs):
            from rlhf.commands.runs import runs_main

            runs_main(command)
        elif isinstance(command, Export | Import):
            from rlhf.commands.runs import export_main, import_main

            (export_main if isinstance(command, Export) else import_main)(command)
        elif isinstance(command, Record):
            from rlhf.commands.record import record_main

            record_main(command)
        elif isinstance(command, RewardCommand):
            from rlhf.reward.fit import reward_main

            reward_main(command)
        else:
            from rlhf.run.runner import run

            run(command)
    except ConfigError as exc:  # exit 1 where it is not the input (a full disk: DiskFull)
        fail(str(exc), getattr(exc, "exit_code", 2))
    except (OSError, sqlite3.Error) as exc:  # a full disk, a read-only run directory
        from rlhf.store import io_error_line

        print(f"rlhf: error: {io_error_line(exc)}", file=sys.stderr)
        raise SystemExit(1) from None
    except KeyboardInterrupt as exc:
        # A run stops on Ctrl-C with a checkpoint and says how to resume (RunInterrupted).
        message = getattr(exc, "message", "interrupted; every stored label is kept")
        print(f"rlhf: {message}", file=sys.stderr)
        raise SystemExit(getattr(exc, "exit_code", 130)) from None


def _serve(command: Serve) -> None:
    from rlhf.run.run_dir import open_run_dir

    command.validate()
    run_dir = open_run_dir(command.run)
    from rlhf.feedback.session import serve_run

    serve_run(run_dir.root, command.web, command.video)
