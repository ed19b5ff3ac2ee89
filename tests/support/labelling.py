"""Pairs a person could have labelled: their videos are marked ready (the store refuses the rest)."""

from __future__ import annotations

from collections.abc import Callable

from rlhf.store import VIDEO_READY, LabelStore


def mark_ready(store: LabelStore, pair_ids: list[int]) -> list[int]:
    """Mark each pair's video ready (no file is written); returns the ids."""
    for pair_id in pair_ids:
        store.mark_video(pair_id, VIDEO_READY, path=f"{pair_id}.mp4")
    return pair_ids


def shown_pairs(
    store: LabelStore, add_pairs: Callable[[LabelStore, int], list[int]], n: int
) -> list[int]:
    """``n`` new pairs whose videos are ready, as if shown on the labelling page."""
    return mark_ready(store, add_pairs(store, n))
