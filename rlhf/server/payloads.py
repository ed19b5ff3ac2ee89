"""The JSON the page reads: a pair to label, the run's progress, and why there is nothing to do."""

from __future__ import annotations

from typing import Any

from rlhf.core.status import Phase, TrainerStatus
from rlhf.data.seed_labels import imported_pairs
from rlhf.server.eta import eta_range
from rlhf.server.named import labeller_name, labellers_payload
from rlhf.server.state import ServerState
from rlhf.store import RATING, PairRecord
from rlhf.store.meta import (
    ENV_ID_META,
    RUN_NAME_META,
    SCALE_META,
    STATUS_META,
    TARGET_META,
    TASK_META,
)
from rlhf.store.protocols import ServerStore

ENDED_REASONS = {
    Phase.FINISHED: "Training has finished: there is nothing left to label. Thank you!",
    Phase.INTERRUPTED: "Training was interrupted: your labels are saved for when it resumes.",
    Phase.CRASHED: "Training stopped with an error: your labels are saved.",
}
CLOSING_REASON = "The labelling session is ending: your labels are saved. Thank you!"
NEXT_PAIR_REASON = "Preparing the next pair..."


def pair_payload(rec: PairRecord, store: ServerStore | None = None) -> dict[str, Any]:
    """A query for the page: a pair to compare, or (kind 'rating') one clip to grade on
    ``scale`` ({"levels": K, "names": [...]}, from the store)."""
    payload = {
        "pair_id": rec.id,
        "video_url": f"/videos/{rec.id}.mp4",
        "iteration": rec.iteration,
        "kind": rec.kind,
    }
    if rec.kind == RATING and store is not None:
        payload["scale"] = rating_scale(store)
    return payload


def rating_scale(store: ServerStore) -> dict[str, Any]:
    """The run's grade scale (the generic 0-6 one for a store that never said)."""
    scale = store.get_meta(SCALE_META)
    if isinstance(scale, dict) and isinstance(scale.get("names"), list):
        return {"levels": len(scale["names"]), "names": [str(n) for n in scale["names"]]}
    names = [str(i) for i in range(7)]
    names[0], names[-1] = "0 worst", "6 best"
    return {"levels": 7, "names": names}


_FIGURES = (
    "iteration",
    "env_steps",
    "total_timesteps",
    "latest_true_return",
    "latest_success_rate",
    "labels_used",
    "labels_needed",
    "eta_seconds",
    "reward_accuracy",
)
"""The trainer's figures the page shows as the trainer wrote them (None before its first status)."""


def status_payload(state: ServerState) -> dict[str, Any]:
    """Progress and trainer figures for the page (also the body of ``GET /api/status``).

    The trainer's figures come from its :class:`TrainerStatus` (None before it wrote one);
    ``closing`` is true during the grace period at the end of a run.
    """
    store = state.store
    counts = store.counts()
    trainer = TrainerStatus.from_json(store.get_meta(STATUS_META))
    hint = state.total_labels_hint
    # 0 means the trainer has not said (or asked) yet: then the run's configured total says more.
    # Its figure is as old as its last status update, while every stored pair has been requested
    # (and only a pair can be labelled): never report fewer requested than that, so the page
    # never shows "12 of 10".
    # Labels copied from --labels-from were never asked here: the page counts this run's own.
    imported = imported_pairs(store)
    requested = (trainer.labels_requested if trainer is not None else 0) or hint or 0
    requested = max(requested, counts.pairs - imported) or None
    total = (trainer.labels_total if trainer is not None else 0) or hint
    done = counts.labelled - imported
    target = None if trainer is None else trainer.labels_target

    figures = {name: None if trainer is None else getattr(trainer, name) for name in _FIGURES}
    return {
        "labels_done": done,
        "labels_imported": imported,
        "labels_requested": requested,
        "total_labels": total,
        "pending": counts.pending_video,
        "ready": counts.ready_unlabelled,
        # Named labellers: counts that move with another's answer would tell it (named.py).
        "equal": None if state.labellers is not None else counts.equal,
        "skipped": None if state.labellers is not None else counts.skipped,
        "failed": counts.failed,
        "pairs": counts.pairs - imported,
        **figures,
        # The trainer counts every stored answer; the page, this run's own (as labels_done).
        "labels_target": None if target is None else max(0, target - imported),
        "labels_retired": counts.retired,
        "eta": time_left(state, trainer, (total or 0) - done),
        "feedback_kind": "pairs" if trainer is None else trainer.feedback_kind,
        "final": trainer is not None and trainer.final,
        "phase": None if trainer is None else trainer.phase.value,
        "message": None if trainer is None else trainer.message or None,
        "resume_command": None if trainer is None else trainer.resume_command,
        "closing": state.closing,
        "watch_command": state.watch_command,
        "run_name": _str_meta(store, RUN_NAME_META),
        "env_id": _str_meta(store, ENV_ID_META),
        "task": _str_meta(store, TASK_META),
        "target": _str_meta(store, TARGET_META) or None,
        "labeller": labeller_name(state),
        "labellers": labellers_payload(state, labeller_name(state)),
    }


def time_left(
    state: ServerState, trainer: TrainerStatus | None, labels_left: int
) -> dict[str, Any] | None:
    """``{"low_s", "high_s", "from"}``: the time left as a range, or None until it is known.

    While a person still has labels to give, it is theirs at the pace of the answers so far
    (``eta.py``); after that, the trainer's own estimate once a tenth of the steps are done
    (before, its pace is mostly start-up and waits)."""
    if trainer is None or trainer.phase.ended:
        return None
    if labels_left > 0:
        span = eta_range(state.answer_times.snapshot(), labels_left)
        return None if span is None else {"low_s": span[0], "high_s": span[1], "from": "answers"}
    eta, total = trainer.eta_seconds, trainer.total_timesteps
    if eta is None or not total or trainer.env_steps < 0.1 * total:
        return None
    return {"low_s": eta, "high_s": eta, "from": "trainer"}


def policy_payload(store: ServerStore) -> dict[str, Any]:
    """``GET /api/policy``: the latest policy clip (None before the first) and the curve."""
    clip = store.latest_policy_clip()
    return {
        "clip": None
        if clip is None
        else {
            "clip_id": clip.id,
            "iteration": clip.iteration,
            "env_step": clip.env_step,
            "video_url": f"/policy/{clip.id}.mp4",
        },
        "curve": [
            {
                "iteration": p.iteration,
                "env_step": p.env_step,
                "true_return": p.true_return,
                "predicted_return": p.predicted_return,
                "accuracy": p.accuracy,
            }
            for p in store.curve()
        ],
    }


def _str_meta(store: ServerStore, key: str) -> str | None:
    value = store.get_meta(key)
    return value if isinstance(value, str) else None


def waiting(
    status: dict[str, Any], held_elsewhere: bool, held_by_others: bool = False
) -> tuple[str, str]:
    """(state, reason) shown when there is no pair to label: ``held_elsewhere``, the page holds
    pairs already; ``held_by_others``, other labellers hold ready ones.

    One sentence per state a person can tell apart: a pair on its way (rendering, or every ready
    one already on this page) is one state to them, however it is on its way; four sentences
    flashing by while a pair renders read as noise. ``state`` still tells a script which it is.
    """
    phase = Phase(status["phase"]) if status["phase"] else None
    if status["closing"]:
        return "finished", ENDED_REASONS.get(phase, CLOSING_REASON)  # type: ignore[arg-type]
    if status["pending"] > 0:
        return "rendering", NEXT_PAIR_REASON
    if status["ready"] > 0 and held_by_others:
        return "busy", "Every pair ready now is with another labeller; waiting for new ones..."
    if status["ready"] > 0 and held_elsewhere:
        return "busy", NEXT_PAIR_REASON
    if phase is Phase.FINISHED:
        return "finished", ENDED_REASONS[Phase.FINISHED]
    if phase is Phase.EXPLORING and status["message"]:
        return "waiting", status["message"]  # no pair until it ends, and it says when
    if not status["pairs"]:
        return "waiting", "Waiting for the trainer's first pairs..."
    return "waiting", "Every pair asked so far is answered: the trainer asks for more as it trains."
