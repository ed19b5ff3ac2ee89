"""Where labels come from. Either way they end up in the run's store, which the loop reads.

* :class:`SyntheticSource` answers at once with a simulated teacher and stores pairs and labels
  together, so a batch run leaves the same record as an interactive one (with
  ``--policy-clip-every``, it also owns the render process that draws the policy's clips).
* :class:`HumanSource` queues pairs for people (in a random left/right order) and runs the
  labelling session (render worker, web server) that shows them; answers arrive in the store
  whenever people give them.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from rlhf.config import TeacherConfig, VideoConfig, WebConfig
from rlhf.core.status import plural
from rlhf.core.types import Pair, Segment
from rlhf.data.seed_labels import imported_pairs
from rlhf.store.protocols import TrainerStore

if TYPE_CHECKING:
    from rlhf.feedback.policy_clips import PolicyClipWorker


class FeedbackSource(Protocol):
    """Takes pairs to be labelled; the labels always end up in the store."""

    def request(self, pairs: list[Pair], iteration: int) -> None: ...

    def request_ratings(self, segments: list[Segment], iteration: int) -> None:
        """Ask for a grade of each clip (on the run's scale)."""
        ...

    def waiting_note(self) -> str:
        """Where the requested labels stand, for a person waiting on them (one clause)."""
        ...

    def problem(self) -> str | None:
        """Why the requested labels can never arrive (None: they can)."""
        ...

    def state_dict(self) -> dict[str, Any]: ...

    def load_state_dict(self, state: dict[str, Any]) -> None: ...

    def drain(self, grace: float) -> None:
        """The run has finished: let what is on its way arrive (for ``grace`` seconds at most)
        before the last labels are fitted; :meth:`close` follows once the run's final figures
        are written."""
        ...

    def close(self, grace: float = 0.0) -> None: ...


class SyntheticSource:
    """Labels pairs at once with a B-Pref simulated teacher (true env reward)."""

    def __init__(
        self,
        cfg: TeacherConfig,
        store: TrainerStore,
        rng: np.random.Generator,
        levels: int = 7,
        clips: PolicyClipWorker | None = None,
    ) -> None:
        from rlhf.feedback.rating_teacher import RatingTeacher
        from rlhf.feedback.teachers import SyntheticTeacher

        self.teacher = SyntheticTeacher(cfg, rng)
        # The same stream (saved with the run's rngs): a run that asks for no ratings draws
        # exactly what it drew before ratings existed.
        self.rater = RatingTeacher(cfg, levels, rng)
        self.store = store
        self.clips = clips  # --policy-clip-every: the render process this source owns

    def request(self, pairs: list[Pair], iteration: int) -> None:
        if self.clips is not None:
            self.clips.check()
        answers = self.teacher.label(pairs)
        self.store.add_pairs_with_labels(pairs, answers, source="synthetic", iteration=iteration)

    def request_ratings(self, segments: list[Segment], iteration: int) -> None:
        grades = self.rater.grade(segments)
        self.store.add_rated_clips(
            segments, grades, self.rater.levels, source="synthetic", iteration=iteration
        )

    def waiting_note(self) -> str:
        return "the synthetic teacher answers at once"

    def problem(self) -> str | None:
        return None

    def state_dict(self) -> dict[str, Any]:
        # The teacher's thresholds scale with the range of returns it has seen so far.
        return {"lo": self.teacher.lo, "hi": self.teacher.hi, "rated": list(self.rater.seen)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.teacher.lo, self.teacher.hi = float(state["lo"]), float(state["hi"])
        self.rater.seen = [float(x) for x in state.get("rated", [])]

    def drain(self, grace: float) -> None:
        """Let the policy clips queued so far be drawn, then stop their process."""
        self.close(grace)

    def close(self, grace: float = 0.0) -> None:
        """Stop the policy clips' render process, if any (after ``grace`` seconds at most)."""
        if self.clips is not None:
            self.clips.close(grace)


class HumanSource:
    """Queues pairs for people and runs the labelling session that shows them."""

    def __init__(
        self,
        run_root: Path,
        store: TrainerStore,
        web: WebConfig,
        video: VideoConfig,
        rng: np.random.Generator,
        say: Callable[[str], None],
        total_labels: int,
    ) -> None:
        from rlhf.feedback.session import LabellingSession

        self.store = store
        self.rng = rng
        self.session = LabellingSession(
            run_root, web, video, say=say, total_labels_hint=total_labels
        ).start()

    @property
    def url(self) -> str:
        return self.session.url

    def request(self, pairs: list[Pair], iteration: int) -> None:
        from rlhf.feedback.human import queue_for_humans

        queue_for_humans(self.store, pairs, self.rng, iteration)

    def request_ratings(self, segments: list[Segment], iteration: int) -> None:
        self.store.add_rating_queries(segments, iteration)

    def waiting_note(self) -> str:
        counts = self.store.counts()
        # Named labellers each open their own link (printed at the start): the address without
        # a token would only answer "open your own link".
        where = "at each labeller's link" if self.session.server.labeller_urls else f"at {self.url}"
        notes = [f"{plural(counts.ready_unlabelled, 'pair')} ready to label {where}"]
        if counts.pending_video:
            notes.append(f"{plural(counts.pending_video, 'video')} being rendered")
        if counts.failed:
            notes.append(f"{plural(counts.failed, 'video')} failed")
        return "; ".join(notes)

    def problem(self) -> str | None:
        worker = self.session.worker
        if worker is not None and not worker.is_alive():
            return (
                f"the render worker stopped (exit code {worker.exitcode}), so no pair can be shown"
            )
        counts = self.store.counts()
        asked = counts.pairs - imported_pairs(self.store)  # --labels-from pairs have no video
        if asked and counts.failed == asked:
            return f"every video failed to render ({self._last_render_error()})"
        return None

    def _last_render_error(self) -> str:
        from rlhf.store import UnknownPair

        try:  # pair ids count up from 1, so the newest is the count
            return self.store.get_pair_record(self.store.counts().pairs).video_error or "no reason"
        except UnknownPair:
            return "no reason recorded"

    def state_dict(self) -> dict[str, Any]:
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        pass

    def drain(self, grace: float) -> None:
        """Store the answers still in flight (``grace`` seconds at most); the page stays up."""
        self.session.drain(grace)

    def close(self, grace: float = 0.0) -> None:
        """Accept answers still in flight for ``grace`` seconds, then stop the session."""
        self.session.stop(grace=grace)
