"""What the loop waits for, said aloud; and what it will never get, refused in one line.

Every wait says on the terminal (``say``) and on the labelling page (``status``, straight to the
store) what it waits for and why, and ends with an error as soon as what it waits for can never
come. Nothing here knows PPO or the reward model: the loop passes in the store, the feedback
source, the stop signals and how to tell people.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from rlhf.config import flag
from rlhf.core.status import labels_wait_message
from rlhf.feedback.sources import FeedbackSource
from rlhf.run.lifecycle import RunError, StopSignals
from rlhf.run.report import StatusBoard
from rlhf.store.protocols import TrainerStore

NO_SEGMENT_ITERATIONS = 10
"""Iterations without a single segment after which a run is refused."""


def wait_for_labels(
    needed: int,
    store: TrainerStore,
    feedback: FeedbackSource,
    stop: StopSignals,
    say: Callable[[str], None],
    status: StatusBoard,
) -> None:
    """``--feedback-wait``: block until ``needed`` labels (skips included) are in the store, or a stop is asked.

    Raises:
        RunError: the labels can never come (e.g. no video can be rendered).
    """
    shown = None
    while (missing := needed - store.counts().labelled) > 0 and not stop.requested:
        problem = feedback.problem()
        if problem is not None:
            raise RunError(f"waiting for labels that cannot come: {problem}")
        message = labels_wait_message(missing, trained=False)
        # The page is the labelling place: it gets the sentence, not the note with its address.
        status.waiting(message, missing, needed)
        if missing != shown:
            say(f"{message}: {feedback.waiting_note()}")
            shown = missing
        stop.wait(0.5)


def refuse_without_segments(
    pool_size: int, iterations: int, segment_length: int, longest_episode: int
) -> None:
    """Refuse, after a few iterations, a run whose episodes are all shorter than a segment.

    With ``--terminations standard`` a random policy may fall before a segment's worth of steps,
    every time: no query could ever be asked, and the run would train on nothing.

    Raises:
        RunError: no segment in :data:`NO_SEGMENT_ITERATIONS` iterations.
    """
    if pool_size or iterations < NO_SEGMENT_ITERATIONS:
        return
    raise RunError(
        f"no episode lasted a segment ({segment_length} steps) in {NO_SEGMENT_ITERATIONS}"
        f" iterations (the longest: {longest_episode} steps), so no pair can be asked about:"
        f" lower {flag('query.segment_length')} or use {flag('terminations')} fixed-horizon"
    )


SAY_EVERY_S = 30.0
"""While a wait goes on, the terminal hears of it again this often (the page every half second)."""


def wait_for_schedule(
    trained: bool,
    store: TrainerStore,
    feedback: FeedbackSource,
    stop: StopSignals,
    say: Callable[[str], None],
    status: StatusBoard,
) -> None:
    """``--feedback-pace``: block until every pair asked for is answered, retired or failed, or a
    stop is asked (nothing asked: no wait), so PPO waits while the labeller is behind the schedule
    (before its first update, with no ``trained`` reward yet, it waits to start learning).

    The terminal hears when the wait starts and then every :data:`SAY_EVERY_S` seconds; the page
    each poll: the labels still needed, and the labels in the store when the wait ends.

    Raises:
        RunError: the labels can never come (e.g. no video can be rendered).
    """
    said_at = None
    while (live := store.counts().live) > 0 and not stop.requested:
        problem = feedback.problem()
        if problem is not None:
            raise RunError(f"waiting for labels that cannot come: {problem}")
        message = labels_wait_message(live, trained)
        status.waiting(message, live, store.label_count() + live)
        now = time.monotonic()
        if said_at is None or now - said_at >= SAY_EVERY_S:
            say(f"{message}: {feedback.waiting_note()}")
            said_at = now
        stop.wait(0.5)
