"""Policy clips for runs without a labelling session (``--feedback synthetic`` with
``--policy-clip-every N``): one background render process that draws the clips the trainer
queues, for TensorBoard (``videos/policy``).

The same :class:`~rlhf.render.worker.RenderWorker` a human run uses, with one process: synthetic
pairs are stored labelled and without a video, so it only ever claims policy clips. The trainer
never waits for it. Like a human run's worker, it starts whether or not GL works here and records
each clip it cannot draw as failed; the trainer says so once (see :func:`rlhf.run.agent_view.show`)
and trains on, since the clips change nothing it learns. A process that dies (a GL backend
MuJoCo cannot even load) is said once too, where a human run would stop for want of videos.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from rlhf.config import VideoConfig
from rlhf.feedback.session import LABELS_FILE, VIDEOS_DIR
from rlhf.render.worker import RenderWorker
from rlhf.store.protocols import TrainerStore


class PolicyClipWorker:
    """One render process drawing the run's policy clips; ``close`` stops it.

    Example:
        clips = PolicyClipWorker(run_dir.root, store, cfg.video)
        ...  # the trainer queues clips in the store and logs those drawn
        clips.close(grace=10.0)
    """

    def __init__(
        self,
        run_root: Path,
        store: TrainerStore,
        video: VideoConfig,
        say: Callable[[str], None] = print,
    ) -> None:
        self.store = store
        self.say = say
        self.warned = False
        root = Path(run_root)
        self.worker = RenderWorker(root / LABELS_FILE, root / VIDEOS_DIR, video, processes=1)
        self.worker.start()

    def check(self) -> None:
        """Say once if the render process has died (e.g. MuJoCo could not load its GL backend):
        no clip will be drawn, and the run goes on."""
        if self.warned or self.worker.is_alive() or self.worker.pid is None:
            return
        self.warned = True
        self.say(
            f"warning: the render process for policy clips stopped (exit code "
            f"{self.worker.exitcode}): no clip reaches TensorBoard; training goes on"
        )

    def close(self, grace: float = 0.0, poll: float = 0.1) -> None:
        """Let the clips queued so far be drawn for up to ``grace`` seconds (so the run's last
        clip reaches TensorBoard), then stop the process. Idempotent."""
        deadline = time.monotonic() + grace
        while (
            self.worker.is_alive()
            and time.monotonic() < deadline
            and self.store.policy_clips_in_flight()
        ):
            time.sleep(poll)
        self.check()
        self.worker.stop()
