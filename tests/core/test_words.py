"""Counts said to a person: a noun agrees with its number, on the terminal and on the page."""

from __future__ import annotations

import pytest

from rlhf.core.status import Phase, TrainerStatus, labels_wait_message, plural


@pytest.mark.parametrize(
    ("n", "said"), [(0, "0 pairs"), (1, "1 pair"), (2, "2 pairs"), (1024, "1,024 pairs")]
)
def test_a_count_agrees_with_its_noun(n: int, said: str) -> None:
    assert plural(n, "pair") == said


def test_a_wait_for_one_label_says_one_label() -> None:
    assert labels_wait_message(1, trained=False) == (
        "waiting for 1 more label before the agent starts learning"
    )
    assert labels_wait_message(2, trained=True).startswith("waiting for 2 more labels before")


def test_the_status_carries_the_final_figures_and_what_is_asked() -> None:
    status = TrainerStatus(Phase.FINISHED, feedback_kind="ratings", reward_accuracy=0.8, final=True)
    back = TrainerStatus.from_json(status.to_json())
    assert back is not None and (back.feedback_kind, back.reward_accuracy, back.final) == (
        "ratings",
        0.8,
        True,
    )
    # A flag is a bool, never a number; a number is never a bool.
    odd = TrainerStatus.from_json({"phase": "finished", "final": 1, "labels_used": True})
    assert odd is not None and odd.final is False and odd.labels_used == 0
