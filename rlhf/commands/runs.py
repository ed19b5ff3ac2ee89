"""``rlhf runs list|report|clean``: the command line of :mod:`rlhf.commands.housekeeping`."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Literal

import tyro

from rlhf.commands.housekeeping import CleanRule, RunInfo, clean, human_size, scan, table
from rlhf.config import ConfigError, command_check, flag
from rlhf.config.ranges import at_least


@dataclass(frozen=True)
class Runs:
    """rlhf runs: list the runs of a runs directory, report on them, or free their disk space.

    list: one line per run. report: the same with each part's size and what clean would free.
    clean: remove videos/ and checkpoints/ of crashed runs and of runs untouched for
    --max-age-days (and, with --min-labels N, of runs with fewer labels, graded clips counted);
    labels.sqlite, config.json, summary.json and tb/ always stay, and a running run is never
    touched. Shows what it would remove unless --no-dry-run is given."""

    action: Annotated[Literal["list", "report", "clean"], tyro.conf.Positional] = "list"
    """What to do: list, report or clean."""
    runs_dir: Annotated[str, tyro.conf.arg(metavar="DIR")] = "runs"
    """The runs directory."""
    max_age_days: float = 30.0
    """clean: runs untouched for this many days are cleaned."""
    min_labels: int = 0
    """clean: runs with fewer labels than this are cleaned too (0: off); the grades of
    --feedback-kind ratings count as labels."""
    crashed: bool = True
    """clean: crashed runs are cleaned whatever their age."""
    dry_run: bool = True
    """clean: only show what would be removed; --no-dry-run removes it."""

    def validate(self) -> None:
        check = command_check(Runs)
        # inf: never by age; nan is no number of days
        check(self.max_age_days >= 0, "{max_age_days} must be >= 0")
        at_least(check, "min_labels", self.min_labels, 0, 10**9)
        check(Path(self.runs_dir).is_dir(), "{runs_dir} ", f"{self.runs_dir}: no such directory")


def runs_main(cmd: Runs) -> None:
    cmd.validate()
    infos = scan(Path(cmd.runs_dir))
    if not infos:
        print(f"no runs in {cmd.runs_dir}")
        return
    if cmd.action == "list":
        print(table((_row(i) for i in infos), _HEAD))
    elif cmd.action == "report":
        _report(infos, CleanRule(cmd.max_age_days, cmd.min_labels, cmd.crashed))
    else:
        _clean(infos, CleanRule(cmd.max_age_days, cmd.min_labels, cmd.crashed), cmd.dry_run)


_HEAD = ["run", "env", "status", "steps", "labels", "return", "reward acc", "age d", "size"]


def shown_name(path: Path) -> str:
    """A run's name on one line: a directory made by hand may hold a newline or a control
    character (``rlhf train`` refuses them), shown escaped as Python writes it."""
    name = path.name
    return name if name.isprintable() else name.encode("unicode_escape").decode("ascii")


def _row(i: RunInfo) -> list[str]:
    return [
        shown_name(i.path),
        i.env_id,
        f"{i.status} ({flag('max_minutes')})" if i.ended_on_time else i.status,
        "-" if i.env_steps is None else f"{i.env_steps:,}",
        _answers(i),
        "-" if i.final_return is None else f"{i.final_return:.1f}",
        "-" if i.reward_accuracy is None else f"{i.reward_accuracy:.2f}",
        f"{i.age_days:.1f}",
        human_size(i.size),
    ]


def _answers(i: RunInfo) -> str:
    """The labels cell: labels of pairs, then graded clips where there are any."""
    if i.labels is None or i.ratings is None:
        return "?"
    if not i.ratings:
        return str(i.labels)
    return f"{i.ratings} ratings" if not i.labels else f"{i.labels} + {i.ratings} ratings"


def _report(infos: list[RunInfo], rule: CleanRule) -> None:
    parts = ["videos", "checkpoints", "tb", "labels"]
    rows = [
        [
            shown_name(i.path),
            i.status,
            *(human_size(i.sizes[p]) for p in parts),
            rule.reason(i) or "-",
        ]
        for i in infos
    ]
    print(table(rows, ["run", "status", *parts, "clean would free it because"]))
    total = sum(i.size for i in infos)
    freed = sum(i.cleanable for i in infos if rule.reason(i))
    print(
        f"\n{len(infos)} runs, {human_size(total)}; clean (--max-age-days {rule.max_age_days:g}"
        f", --min-labels {rule.min_labels}) would free {human_size(freed)}"
    )


def _clean(infos: list[RunInfo], rule: CleanRule, dry_run: bool) -> None:
    chosen = [(i, reason) for i in infos if (reason := rule.reason(i))]
    verb = "would remove" if dry_run else "removed"
    freed = 0
    for info, reason in chosen:
        parts = " and ".join(f"{p}/" for p in ("videos", "checkpoints") if info.sizes[p])
        if not dry_run:
            try:
                clean(info)
            except OSError as exc:
                print(f"{shown_name(info.path)}: left as is: {exc}", file=sys.stderr)
                continue
        freed += info.cleanable
        print(f"{shown_name(info.path)} ({reason}): {verb} {parts}, {human_size(info.cleanable)}")
    tail = " (dry run: add --no-dry-run to remove)" if dry_run and chosen else ""
    print(f"{verb} {human_size(freed)} from {len(chosen)} of {len(infos)} runs{tail}")


@dataclass(frozen=True)
class Export:
    """rlhf export: write a run's segments, pairs and labels as a dataset (Parquet files and
    dataset.json; see rlhf/data/datasets.py for the schema). The run is only read."""

    run: Annotated[str, tyro.conf.Positional, tyro.conf.arg(metavar="RUN")]
    """The run directory, e.g. runs/Hopper-v5__human__1__20261122-101500."""
    out: Annotated[str, tyro.conf.Positional, tyro.conf.arg(metavar="OUT")]
    """A new directory for the dataset."""


@dataclass(frozen=True)
class Import:
    """rlhf import: write a dataset into DIR/labels.sqlite, a new label store with the same
    ids (unlabelled pairs get their videos rendered again when served)."""

    dataset: Annotated[str, tyro.conf.Positional, tyro.conf.arg(metavar="DATASET")]
    """A directory written by rlhf export."""
    target: Annotated[str, tyro.conf.Positional, tyro.conf.arg(metavar="DIR")]
    """Where the new labels.sqlite goes."""

    def validate(self) -> None:
        target = Path(self.target)
        if target.exists() and not target.is_dir():
            raise ConfigError(f"{target} is not a directory; name a directory for labels.sqlite")


def export_main(cmd: Export) -> None:
    from rlhf.data.datasets import export_run

    counts = export_run(Path(cmd.run), Path(cmd.out))
    print(
        f"{cmd.out}: {counts.segments} segments, {counts.pairs} pairs, {counts.labels} labels,"
        f" {counts.ratings} ratings"
    )


def import_main(cmd: Import) -> None:
    from rlhf.data.datasets import import_dataset

    counts = import_dataset(Path(cmd.dataset), Path(cmd.target))
    store = Path(cmd.target) / "labels.sqlite"
    print(
        f"{store}: {counts.segments} segments, {counts.pairs} pairs, {counts.labels} labels,"
        f" {counts.ratings} ratings"
    )
