"""What the trainer tells the labelling page: a typed status, kept in the store's ``meta`` table.

The trainer and the web server share nothing but the store, so the status travels through it as
JSON under :data:`STATUS_KEY`. The loop writes it; the server only reads it, through
:meth:`TrainerStatus.from_json`, which accepts whatever an older or crashed trainer left behind.
"""

from __future__ import annotations

import dataclasses
import enum
import math
import time
from dataclasses import dataclass
from typing import Any

STATUS_KEY = "trainer_status"
"""The store meta key holding the latest :class:`TrainerStatus` (its users name it
``rlhf.store.meta.STATUS_META``; it is defined here because ``core/`` imports no other room)."""


class Phase(enum.StrEnum):
    """Where the trainer is in a run's life."""

    STARTING = "starting"
    """Setting up (envs, networks, the labelling session)."""
    WAITING = "waiting for labels"
    """The agent (PPO or SAC) is paused until enough labels have arrived (``message`` says how many)."""
    TRAINING = "training"
    """Collecting rollouts and updating the policy."""
    EXPLORING = "exploring"
    """SAC's start with a learned reward (PEBBLE): it explores on its own and asks nothing yet
    (``message`` says until about which step)."""
    FINISHED = "finished"
    """The step budget is spent. The labelling server still accepts answers in flight for
    ``--finish-grace`` seconds, then stops."""
    INTERRUPTED = "interrupted"
    """Stopped by Ctrl-C or SIGTERM after writing a checkpoint; ``resume_command`` continues it."""
    CRASHED = "crashed"
    """Stopped by an error; the last checkpoint can be resumed."""
    NO_TRAINER = "no trainer running"
    """``rlhf serve`` is serving the run's pairs without a trainer; labels are kept for a resume."""

    @property
    def ended(self) -> bool:
        """No trainer will ask for more labels in this session."""
        return self in (Phase.FINISHED, Phase.INTERRUPTED, Phase.CRASHED, Phase.NO_TRAINER)


@dataclass(frozen=True)
class TrainerStatus:
    """One snapshot of the trainer, as the page and ``rlhf serve`` show it.

    Attributes:
        phase: where the run is (see :class:`Phase`).
        message: one sentence for a person: what the trainer does or waits for, and why.
        iteration: PPO iterations completed.
        env_steps: environment steps taken so far (all envs).
        total_timesteps: the run's step budget.
        latest_true_return: mean true return of the last episodes (None before the first ends).
        latest_success_rate: share of those episodes that ended at the goal (None: the env
            reports no success, or no episode has ended).
        labels_requested: pairs sent for labelling so far.
        labels_total: labels the run asks for over its whole budget.
        labels_used: labels the reward model has been trained on.
        labels_needed: labels still needed before the agent starts learning or goes on (None: not
            waiting).
        labels_target: labels in the store when that wait ends (the page counts down to it).
        eta_seconds: wall time left for the run at the pace so far (None: not known yet).
        resume_command: the command that continues this run (set once it has stopped).
        updated_at: when this status was written (seconds since the epoch).
        feedback_kind: what a person is asked: "pairs", "ratings" or "both" (the page words
            its question, keys and figures for it).
        reward_accuracy: the learned reward's held-out figure of its last fit: for pairs, the
            share of held-out labels it sides with; for a ratings-only run, the share of held-out
            clip pairs with different grades it orders as the grades do (None: not measured).
        final: the figures are the run's final summary (``summary.json``): the page shows
            them as they are there, nothing counted on top.
    """

    phase: Phase
    message: str = ""
    iteration: int = 0
    env_steps: int = 0
    total_timesteps: int = 0
    latest_true_return: float | None = None
    latest_success_rate: float | None = None
    labels_requested: int = 0
    labels_total: int = 0
    labels_used: int = 0
    labels_needed: int | None = None
    labels_target: int | None = None
    eta_seconds: float | None = None
    resume_command: str | None = None
    updated_at: float = 0.0
    feedback_kind: str = "pairs"
    reward_accuracy: float | None = None
    final: bool = False

    def to_json(self) -> dict[str, Any]:
        """A JSON-safe dict (NaN/inf returns become None)."""
        data = dataclasses.asdict(self)
        data["phase"] = self.phase.value
        for name in ("latest_true_return", "reward_accuracy", "eta_seconds"):
            value = data[name]
            data[name] = None if value is None or not math.isfinite(value) else value
        return data

    @classmethod
    def from_json(cls, data: Any) -> TrainerStatus | None:
        """Parse what :meth:`to_json` wrote; None when there is no usable status.

        Unknown keys are ignored and wrongly typed values fall back to their defaults, so a
        status written by another version of rlhf never breaks the page.
        """
        if not isinstance(data, dict):
            return None
        try:
            phase = Phase(data.get("phase"))
        except ValueError:
            return None
        values: dict[str, Any] = {"phase": phase}
        for name, kinds in _FIELD_TYPES.items():
            value = data.get(name)
            if isinstance(value, bool) is not (kinds is bool) or not isinstance(value, kinds):
                continue  # missing or wrongly typed: keep the default
            if isinstance(value, float) and not math.isfinite(value):
                continue
            values[name] = value
        return cls(**values)

    def with_(self, **changes: Any) -> TrainerStatus:
        """A copy with ``changes`` and a fresh ``updated_at``."""
        return dataclasses.replace(self, **changes, updated_at=time.time())


_FIELD_TYPES: dict[str, type | tuple[type, ...]] = {
    "message": str,
    "iteration": int,
    "env_steps": int,
    "total_timesteps": int,
    "latest_true_return": (int, float),
    "latest_success_rate": (int, float),
    "labels_requested": int,
    "labels_total": int,
    "labels_used": int,
    "labels_needed": int,
    "labels_target": int,
    "eta_seconds": (int, float),
    "resume_command": str,
    "updated_at": (int, float),
    "feedback_kind": str,
    "reward_accuracy": (int, float),
    "final": bool,
}
"""The JSON types each field accepts when read back (None is always its default)."""


def plural(n: int, one: str, many: str | None = None) -> str:
    """``"1 label"``, ``"2 labels"``, ``"1,024 videos"``: a count and its noun, agreeing."""
    return f"{n:,} {one if n == 1 else (many or one + 's')}"


def labels_wait_message(missing: int, trained: bool) -> str:
    """The one sentence a wait for labels is said in, on the terminal and on the page (whose
    copy in ``web/status.js`` counts down with its live count): ``missing`` more, before the
    agent starts learning (not ``trained`` yet) or goes on."""
    why = (
        "before the agent goes on (paused while the labeller catches up with the schedule)"
        if trained
        else "before the agent starts learning"
    )
    return f"waiting for {plural(missing, 'more label', 'more labels')} {why}"
