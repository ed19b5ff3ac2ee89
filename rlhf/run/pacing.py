"""Keeping PPO level with a person: fresh pairs only, and (``--feedback-pace``) a pause while the
labeller is behind the label schedule (that wait is :func:`rlhf.run.waits.wait_for_schedule`).

Pairs asked for long ago judge a policy that no longer exists: after ``--query.retire-after``
iterations unanswered they are no longer shown, and the schedule (which counts what was answered
or still can be) asks for fresh ones in their place. With pacing, PPO waits between iterations
until every pair asked so far is answered, so the step budget is never spent on a reward that
has not seen the labels of the schedule.
"""

from __future__ import annotations

from rlhf.run.logger import Logger
from rlhf.store.protocols import TrainerStore


def retire_stale_pairs(store: TrainerStore, logger: Logger, before: int, step: int) -> int:
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
