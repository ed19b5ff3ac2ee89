"""The human feedback source: pairs go into the label store, in a random left/right order.

People tend to favour one side of the screen. Flipping each pair's display order with
probability 0.5 spreads that bias evenly over both segments, instead of always over the one the
query selector happened to put first. The pair is stored in display order, so a human's "left"
always means the stored left segment; ``swapped`` records the flip for analysis.
"""

from __future__ import annotations

import numpy as np

from rlhf.core.types import Pair
from rlhf.store.protocols import TrainerStore


def display_order(pairs: list[Pair], rng: np.random.Generator) -> tuple[list[Pair], list[bool]]:
    """Flip each pair with probability 0.5; returns (pairs in display order, flipped flags).

    Draws exactly one uniform number per pair from ``rng``, so the same seed gives the same order.
    """
    swapped = [bool(flip) for flip in rng.random(len(pairs)) < 0.5]
    shown = [
        Pair(pair.right, pair.left) if flip else pair
        for pair, flip in zip(pairs, swapped, strict=True)
    ]
    return shown, swapped


def queue_for_humans(
    store: TrainerStore, pairs: list[Pair], rng: np.random.Generator, iteration: int
) -> list[int]:
    """Store ``pairs`` for human labelling in a randomised left/right order; returns their ids.

    The render worker picks them up from the store ('pending' video) and the web page shows them
    once their video is ready.
    """
    shown, swapped = display_order(pairs, rng)
    return store.add_pairs(shown, swapped, iteration)
