"""Keeping PPO level with a person: fresh pairs only, and (``--feedback-pace``) a pause while the
labeller is behind the label schedule.

Pairs asked for long ago judge a policy that no longer exists: after ``--query.retire-after``
iterations unanswered they are no longer shown, and the schedule (which counts what was answered
or still can be) asks for fresh ones in their place. With pacing, PPO waits between iterations
until every pair asked so far is answered, so the step budget is never spent on a reward that
has not seen the labels of the schedule.
"""

from __future__ import annotations

from collections.abc import Callable

from rlhf.run.lifecycle import StopSignals
from rlhf.run.logger import Logger
from rlhf.run.preferences import Preferences
from rlhf.run.waits import wait_for_answers
from rlhf.store import LabelStore


def retire_stale_pairs(store: LabelStore, logger: Logger, before: int, step: int) -> int:
    """Stop showing the pairs asked for before iteration ``before``; returns how many now."""
    retired = store.retire_before(before)
    if retired:
        total = store.counts().retired
        logger.message(
            f"retired {retired} unanswered pairs asked for before iteration {before}: they judge"
            f" an old policy, fresh pairs replace them ({total} retired so far)"
        )
        logger.scalar("labels/retired", total, step)
    return retired


def wait_for_schedule(
    p: Preferences, stop: StopSignals, logger: Logger, publish: Callable[..., None]
) -> None:
    """Hold PPO until every pair asked so far is answered (nothing asked: no wait).

    ``publish(message, labels_needed=N, labels_target=T)`` tells the page: N more labels, i.e.
    T labels in the store when the wait ends (the page counts down from its live count).
    """
    why = (
        "before the agent starts learning"
        if not p.reward.trained
        else "before the agent goes on (paused while the labeller catches up with the schedule)"
    )

    def tell(message: str, missing: int, target: int) -> None:
        publish(message, labels_needed=missing, labels_target=target)

    wait_for_answers(p.store, p.feedback, stop, logger.message, tell, why)
