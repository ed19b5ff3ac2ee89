"""The bookkeeping of a run: stop requests, checkpoint timing, progress counters, the summary.

Nothing here knows PPO or the reward model; :mod:`rlhf.run.loop` puts the pieces together.
"""

from __future__ import annotations

import json
import signal
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

from rlhf.config import ConfigError
from rlhf.core.files import replace_atomic


class RunError(ConfigError):
    """The run cannot usefully go on; the message is one line saying why and what to change.

    A :class:`ConfigError`, so the command line prints it as one line, like a refusal at start.
    """


class DiskFull(RunError):
    """The run stopped because its disk (or quota, or file size limit) is full: not the
    person's input, so the command line exits 1, not 2."""

    exit_code = 1


class RunInterrupted(KeyboardInterrupt):
    """The run stopped on Ctrl-C or SIGTERM after saving everything; ``message`` says how to resume.

    A KeyboardInterrupt, so Python callers see what they would see for a plain Ctrl-C; the
    command line prints ``message`` and exits with ``exit_code`` (130 for SIGINT, 143 for SIGTERM).
    """

    def __init__(self, message: str, exit_code: int) -> None:
        super().__init__(message)
        self.message = message
        self.exit_code = exit_code


class StopSignals:
    """SIGINT and SIGTERM ask the run to stop at the next safe point instead of killing it.

    The loop checks :attr:`requested` between iterations (and :meth:`wait` wakes early while it
    waits for labels), then writes a checkpoint and stops. A second Ctrl-C stops at once, without
    a checkpoint, for a run stuck in a long step. Outside the main thread (where Python cannot
    install handlers) this does nothing, and signals keep their usual effect.
    """

    def __init__(self, say: Callable[[str], None]) -> None:
        self.say = say
        self.signum: int | None = None
        self._event = threading.Event()
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> StopSignals:
        if threading.current_thread() is threading.main_thread():
            for signum in (signal.SIGINT, signal.SIGTERM):
                self._previous[signum] = signal.signal(signum, self._handle)
        return self

    def __exit__(self, *exc: object) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)
        self._previous.clear()

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self.signum is not None and signum == signal.SIGINT:
            raise KeyboardInterrupt  # the second Ctrl-C: stop now
        self.signum = signum
        self._event.set()
        name = "Ctrl-C" if signum == signal.SIGINT else signal.Signals(signum).name
        self.say(
            f"{name}: stopping after this iteration and writing a checkpoint"
            " (press Ctrl-C again to stop at once, without one)"
        )

    @property
    def requested(self) -> bool:
        return self.signum is not None

    @property
    def exit_code(self) -> int:
        """The shell's convention: 128 + the signal number."""
        return 128 + (self.signum or signal.SIGINT)

    def wait(self, seconds: float) -> bool:
        """Sleep up to ``seconds``; True (at once) when a stop has been requested."""
        return self._event.wait(seconds)


class CheckpointClock:
    """When the next periodic checkpoint is due: every N iterations, or every few minutes."""

    def __init__(
        self,
        every_iterations: int,
        minutes: float,
        now: Callable[[], float] = time.monotonic,
    ) -> None:
        self.every = every_iterations
        self.seconds = 60.0 * minutes
        self.now = now
        self.last = now()

    def due(self, iteration: int) -> bool:
        if self.every > 0:
            return iteration % self.every == 0
        return self.now() - self.last >= self.seconds

    def reset(self) -> None:
        self.last = self.now()


@dataclass
class Progress:
    """The loop's counters; saved in every checkpoint and restored on resume."""

    iteration: int = 0
    """PPO iterations completed."""
    env_steps: int = 0
    """Environment steps taken (all envs)."""
    episodes: int = 0
    """Episodes finished."""
    requested: int = 0
    """Pairs sent for labelling."""
    replay_steps: int = 0
    """Env steps spent rolling out replayed pairs (``--query.replay-share``), not in env_steps."""
    train_seconds: float = 0.0
    """Wall time spent training, over every session of the run."""
    sessions: int = 1
    """Trainer sessions of this run (1 + the number of resumes)."""
    recent_returns: deque[float] = field(default_factory=lambda: deque(maxlen=10))
    """True returns of the last episodes (what the summary and the page report)."""
    recent_successes: deque[float] = field(default_factory=lambda: deque(maxlen=10))
    """Success (1/0) of the last episodes of an env that reports it (goal envs); else empty."""
    recent_env_returns: deque[float] = field(default_factory=lambda: deque(maxlen=10))
    """With a target behaviour, the env's own returns of the last episodes; else empty."""

    @property
    def mean_return(self) -> float | None:
        return _mean(self.recent_returns)

    @property
    def success_rate(self) -> float | None:
        return _mean(self.recent_successes)

    @property
    def mean_env_return(self) -> float | None:
        return _mean(self.recent_env_returns)

    def state_dict(self) -> dict[str, Any]:
        return {
            **asdict(self),
            "recent_returns": list(self.recent_returns),
            "recent_successes": list(self.recent_successes),
            "recent_env_returns": list(self.recent_env_returns),
        }

    @classmethod
    def from_state_dict(cls, state: dict[str, Any]) -> Progress:
        returns = deque(state.pop("recent_returns"), maxlen=10)
        # Checkpoints written before success rates were kept have none.
        successes = deque(state.pop("recent_successes", ()), maxlen=10)
        env_returns = deque(state.pop("recent_env_returns", ()), maxlen=10)
        return cls(
            **state,
            recent_returns=returns,
            recent_successes=successes,
            recent_env_returns=env_returns,
        )


def _mean(values: deque[float]) -> float | None:
    return float(sum(values) / len(values)) if values else None


@dataclass(frozen=True)
class Summary:
    """What ``summary.json`` holds when a run stops."""

    env_id: str
    seed: int
    run_name: str
    reward: str
    feedback: str | None
    status: str
    """"finished", "interrupted" (Ctrl-C / SIGTERM, resumable) or "crashed"."""
    interrupted: bool
    env_steps: int
    wall_seconds: float
    """Training time over every session of the run."""
    sps: float
    final_true_return: float | None
    """Mean true return of the last 10 episodes (with a target, the target's return)."""
    episodes: int
    labels_used: int
    reward_val_accuracy: float | None
    sessions: int
    error: str | None = None
    final_success_rate: float | None = None
    """Share of the last 10 episodes that ended at the goal (envs that report success)."""
    replay_steps: int = 0
    """Env steps spent on replayed pairs (``--query.replay-share``), over every session."""
    target: str | None = None
    """The target behaviour that was the run's true reward (``--teacher.target`` NAME or
    ``--teacher.reward`` MODULE:FUNCTION); None: the env's own reward."""
    final_target_return: float | None = None
    """With a target: the mean target return of the last 10 episodes (= final_true_return)."""
    final_env_return: float | None = None
    """With a target: the mean return of the env's own reward over the same episodes."""
    ended_on_time: bool = False
    """Finished because ``--max-minutes`` ran out before ``--total-timesteps`` were spent."""


def write_json_atomic(path: Path, data: dict[str, Any]) -> None:
    """Write ``data`` as JSON so that readers see the old file or the new one, never a torn one."""
    text = json.dumps(data, indent=2) + "\n"
    replace_atomic(path, lambda f: f.write(text.encode()), mode=0o644)
