"""``rlhf runs list|report|clean``: what a runs directory holds, and freeing its disk space.

Reading never changes a run: the label store is opened read-only, and a run a trainer holds
(see :func:`rlhf.run.run_dir.trainer_lock`) is reported as ``running``. Cleaning removes only the two
parts that can be made again or are worth little once a run is over, ``videos/`` and
``checkpoints/``; ``labels.sqlite`` (what people spent their time on), ``config.json``,
``summary.json`` and ``tb/`` always stay.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rlhf.run.run_dir import RunDir, is_trainer_running

CLEANED_PARTS = ("videos", "checkpoints")
"""The only parts of a run that ``clean`` removes."""
DAY = 86_400.0


@dataclass(frozen=True)
class RunInfo:
    """One run directory as ``rlhf runs`` sees it."""

    path: Path
    env_id: str
    status: str
    """finished, interrupted or crashed (from summary.json), running (a trainer holds it) or
    unknown (no summary: killed, or started before summaries existed)."""
    labels: int | None
    """Labels of pairs in the store; None when it cannot be read."""
    ratings: int | None
    """Graded clips in the store (--feedback-kind ratings or both; 0 in a store older than
    ratings); None when it cannot be read."""
    env_steps: int | None
    final_return: float | None
    reward_accuracy: float | None
    age_days: float
    """Days since anything in the run last changed."""
    sizes: dict[str, int]
    """Bytes per part: videos, checkpoints, tb, labels (the store with its journal), other."""
    ended_on_time: bool = False
    """Finished because its --max-minutes ran out before its steps (summary.json)."""

    @property
    def answers(self) -> int | None:
        """Labels given, of both kinds: pairs labelled and clips graded (skips included)."""
        if self.labels is None or self.ratings is None:
            return None
        return self.labels + self.ratings

    @property
    def size(self) -> int:
        return sum(self.sizes.values())

    @property
    def cleanable(self) -> int:
        """Bytes that ``clean`` would free."""
        return sum(self.sizes[part] for part in CLEANED_PARTS)


def scan(runs_dir: Path, now: float | None = None) -> list[RunInfo]:
    """Every run directory directly under ``runs_dir`` (one with a labels.sqlite or
    config.json), oldest first."""
    now = time.time() if now is None else now
    found = [
        _info(path, now)
        for path in sorted(runs_dir.iterdir())
        if path.is_dir()
        and not path.is_symlink()
        and ((path / "labels.sqlite").exists() or (path / "config.json").exists())
    ]
    return sorted(found, key=lambda info: -info.age_days)


def _info(path: Path, now: float) -> RunInfo:
    summary = _read_json(path / "summary.json")
    config = _read_json(path / "config.json")
    sizes, newest = _sizes(path)
    status = summary.get("status", "unknown")
    if is_trainer_running(RunDir(path)):
        status = "running"
    labels, ratings = _count_answers(path / "labels.sqlite")
    return RunInfo(
        path=path,
        env_id=str(summary.get("env_id") or config.get("env_id") or "?"),
        status=str(status),
        labels=labels,
        ratings=ratings,
        env_steps=_number(summary.get("env_steps"), int),
        final_return=_number(summary.get("final_true_return"), float),
        reward_accuracy=_number(summary.get("reward_val_accuracy"), float),
        age_days=max(0.0, (now - newest) / DAY),
        sizes=sizes,
        ended_on_time=status == "finished" and summary.get("ended_on_time") is True,
    )


def _number(value: object, kind: type) -> Any:
    """A figure of summary.json, or None where the file holds something else there (a file
    edited by hand must not stop the listing of every run)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return kind(value) if kind is float or float(value).is_integer() else None


def _read_json(path: Path) -> dict:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _sizes(root: Path) -> tuple[dict[str, int], float]:
    sizes = {"videos": 0, "checkpoints": 0, "tb": 0, "labels": 0, "other": 0}
    newest = root.stat().st_mtime
    for path in root.rglob("*"):
        if path.is_symlink() or not path.is_file():
            continue
        stat = path.stat()
        newest = max(newest, stat.st_mtime)
        top = path.relative_to(root).parts[0]
        part = "labels" if top.startswith("labels.sqlite") else top
        sizes[part if part in sizes else "other"] += stat.st_size
    return sizes, newest


def _count_answers(store: Path) -> tuple[int | None, int | None]:
    """(labels, ratings) in the store; (None, None) when it cannot be read."""
    if not store.exists():
        return 0, 0
    try:
        # mode=ro: listing runs must never create, migrate or lock a store for writing.
        con = sqlite3.connect(f"{store.resolve().as_uri()}?mode=ro", uri=True, timeout=2)
        try:
            labels = int(con.execute("SELECT COUNT(*) FROM labels").fetchone()[0])
            graded = con.execute(  # a store older than ratings (schema 1) has no such table
                "SELECT 1 FROM sqlite_master WHERE type='table' AND name='ratings'"
            ).fetchone()
            if graded is None:
                return labels, 0
            return labels, int(con.execute("SELECT COUNT(*) FROM ratings").fetchone()[0])
        finally:
            con.close()
    except sqlite3.Error:
        return None, None


@dataclass(frozen=True)
class CleanRule:
    """Which runs ``clean`` frees: those that crashed, those untouched for ``max_age_days``, and
    those with fewer than ``min_labels`` labels (0: this rule is off; graded clips count as
    labels). Never a running one."""

    max_age_days: float = 30.0
    min_labels: int = 0
    crashed: bool = True

    def reason(self, info: RunInfo) -> str | None:
        """Why ``info`` would be cleaned, or None."""
        if info.status == "running" or info.cleanable == 0:
            return None
        if self.crashed and info.status == "crashed":
            return "crashed"
        if info.age_days >= self.max_age_days:
            return f"untouched for {info.age_days:.0f} days"
        given = info.answers or 0
        if self.min_labels and given < self.min_labels:
            kinds = "labels and ratings" if info.ratings else "labels"
            return f"{given} {kinds} < {self.min_labels}"
        return None


def clean(info: RunInfo) -> list[Path]:
    """Remove ``videos/`` and ``checkpoints/`` of one run; returns what was removed.

    Raises:
        OSError: a part holds a SQLite file (labels are never deleted), or removal failed.
    """
    removed = []
    for name in CLEANED_PARTS:
        part = info.path / name
        if part.is_symlink():  # never follow a link out of the run
            part.unlink()
            removed.append(part)
            continue
        if not part.is_dir():
            continue
        stores = [p for p in part.rglob("*") if p.name.startswith("labels.sqlite")]
        if stores:
            raise OSError(f"{part} holds {stores[0].name}; labels are never deleted, left as is")
        shutil.rmtree(part)
        removed.append(part)
    return removed


def human_size(size: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    raise AssertionError("unreachable")


def table(rows: Iterable[Iterable[object]], head: list[str]) -> str:
    """Left-aligned first column, right-aligned others; numbers already formatted."""
    cells = [head, *([str(c) for c in row] for row in rows)]
    widths = [max(len(row[i]) for row in cells) for i in range(len(head))]
    lines = []
    for row in cells:
        first, *rest = row
        line = first.ljust(widths[0]) + "".join(
            "  " + c.rjust(w) for c, w in zip(rest, widths[1:], strict=True)
        )
        lines.append(line.rstrip())
    return "\n".join(lines)
