"""A sweep's results: one row per cell, one per group of seeds; as CSV files and printed tables."""

from __future__ import annotations

import csv
import statistics
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rlhf.sweep.grid import shown
from rlhf.sweep.stats import GroupStats, group_stats
from rlhf.sweep.worker import CellResult

METRICS = (
    ("final_true_return", "return"),
    ("labels_used", "labels"),
    ("reward_val_accuracy", "reward acc"),
    ("sps", "steps/s"),
    ("wall_seconds", "wall s"),
)
"""CellResult field -> printed column (the CSV uses the field names)."""

Group = tuple[tuple[tuple[str, Any], ...], list[CellResult]]


def _keys(results: Sequence[CellResult]) -> list[str]:
    return [key for key, _ in results[0].params] if results else []


def _fmt(value: Any, field: str = "") -> str:
    if value is None:
        return "-"
    if field == "reward_val_accuracy":
        return f"{value:.3f}"
    if field in ("final_true_return", "wall_seconds"):
        return f"{value:.1f}"
    if field == "sps":
        return f"{value:.0f}"
    return shown(value)


def cell_table(results: Sequence[CellResult]) -> tuple[list[str], list[list[str]]]:
    """Header and rows of the per-cell table (the CSV adds cell, env_steps and sessions)."""
    header = [*_keys(results), "status", *(name for _, name in METRICS), "error"]
    rows = [
        [
            *(shown(v) for _, v in r.params),
            r.status,
            *(_fmt(getattr(r, f), f) for f, _ in METRICS),
            r.error or "",
        ]
        for r in results
    ]
    return header, rows


def write_cells_csv(path: Path, results: Sequence[CellResult]) -> None:
    fields = [f for f, _ in METRICS]
    with path.open("w", newline="") as f:
        out = csv.writer(f)
        out.writerow(["cell", *_keys(results), "status", *fields, "env_steps", "sessions", "error"])
        for r in results:
            values = [getattr(r, k) for k in (*fields, "env_steps", "sessions")]
            row = [r.name, *(shown(v) for _, v in r.params), r.status]
            out.writerow([*row, *("" if v is None else v for v in values), r.error or ""])


def groups(results: Sequence[CellResult]) -> list[Group]:
    """Cells that differ only by their seed, in the order of their first cell."""
    found: dict[tuple[tuple[str, Any], ...], list[CellResult]] = {}
    for r in results:
        found.setdefault(tuple((k, v) for k, v in r.params if k != "seed"), []).append(r)
    return list(found.items())


def _stats(cells: list[CellResult]) -> tuple[GroupStats | None, float | None]:
    finished = [r for r in cells if r.ok]
    sps = [r.sps for r in finished if r.sps is not None]
    return (
        group_stats([r.final_true_return for r in finished]),  # type: ignore[misc]
        statistics.median(sps) if sps else None,
    )


def group_table(results: Sequence[CellResult]) -> tuple[list[str], list[list[str]]]:
    """Per group: finished cells, final true return mean +- std, IQM [95% CI], median steps/s."""
    keys = [k for k in _keys(results) if k != "seed"]
    header = [*(keys or ["group"]), "n", "return mean ± std", "IQM [95% CI]", "steps/s"]
    rows = []
    for params, cells in groups(results):
        s, sps = _stats(cells)
        n = f"{s.n if s else 0}/{len(cells)}"
        if s is None:
            stats = ["-", "-"]
        else:
            lo, hi = s.iqm_ci
            stats = [f"{s.mean:.1f} ± {s.std:.1f}", f"{s.iqm:.1f} [{lo:.1f}, {hi:.1f}]"]
        rows.append([*([shown(v) for _, v in params] or ["all"]), n, *stats, _fmt(sps, "sps")])
    return header, rows


def write_groups_csv(path: Path, results: Sequence[CellResult]) -> None:
    keys = [k for k in _keys(results) if k != "seed"]
    names = ["mean", "std", "mean_ci_low", "mean_ci_high", "iqm", "iqm_ci_low", "iqm_ci_high"]
    with path.open("w", newline="") as f:
        out = csv.writer(f)
        out.writerow([*keys, "cells", "finished", *(f"return_{n}" for n in names), "median_sps"])
        for params, cells in groups(results):
            s, sps = _stats(cells)
            values: list[Any] = [""] * len(names)
            if s is not None:
                values = [s.mean, s.std, *s.mean_ci, s.iqm, *s.iqm_ci]
            count = [len(cells), s.n if s else 0]
            out.writerow([*(shown(v) for _, v in params), *count, *values, sps or ""])


def format_table(header: list[str], rows: list[list[str]]) -> str:
    """Columns padded to their widest cell; numbers right-aligned."""
    widths = [max(len(str(c)) for c in col) for col in zip(header, *rows, strict=True)]

    def line(cells: list[str]) -> str:
        out = [
            c.rjust(w) if _numeric(c) else c.ljust(w) for c, w in zip(cells, widths, strict=True)
        ]
        return "  ".join(out).rstrip()

    return "\n".join([line(header), *(line(r) for r in rows)])


def _numeric(text: str) -> bool:
    head = text.split(" ")[0].replace("/", "")
    try:
        float(head)
    except ValueError:
        return False
    return True
