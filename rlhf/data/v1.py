"""Schema 1 datasets (still read): the per-step arrays were list columns of segments.parquet.

Columns ``obs``, ``actions``, ``true_rewards`` (float32) and ``qpos``, ``qvel`` (float64), one
list per step, next to ``id``, ``env_id``, ``start_step`` and ``absorbing``; there was no Minari
dataset. Schema 2 (see :mod:`rlhf.data.datasets`) moved the arrays into one.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from rlhf.core.types import Segment
from rlhf.data.checks import check_segment

V1_ARRAYS = ("obs", "actions", "true_rewards", "qpos", "qvel")


class V1Segments:
    """Schema 1: the arrays are list columns of segments.parquet (``file``), already in memory."""

    def __init__(self, index: list[dict[str, Any]], file: Path) -> None:
        self.rows = {row["id"]: row for row in index}
        self.file = file

    def get(self, segment_ids: list[int]) -> dict[int, Segment]:
        return {
            i: check_segment(str(self.file), i, lambda i=i: self._segment(self.rows[i]))
            for i in segment_ids
        }

    @staticmethod
    def _segment(row: dict[str, Any]) -> Segment:
        arrays = {
            name: np.asarray(row[name], np.float64 if name in ("qpos", "qvel") else np.float32)
            for name in V1_ARRAYS
        }
        for name in ("qpos", "qvel"):  # an env without physics state has (T, 0) arrays
            arrays[name] = arrays[name].reshape(len(arrays["obs"]), -1)
        return Segment(
            env_id=row["env_id"], start_step=row["start_step"], absorbing=row["absorbing"], **arrays
        )
