"""The agent in view, trainer side: queue clips of the current policy, record the learning curve
the page draws, and put the rendered clips and the labellers' figures in TensorBoard.

Nothing here renders: a clip is a segment the trainer already cut from its rollout (with its
recorded physics states), queued in the store for the render workers, which draw it when no pair
is waiting (a synthetic run with --policy-clip-every has one render process for them). The trainer never waits for it; it logs each clip once the workers have drawn it.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from rlhf.config import Config
from rlhf.core.types import Segment
from rlhf.run.logger import Logger
from rlhf.store.meta import CLIP_WARNED_META
from rlhf.store.policy import CurvePoint
from rlhf.store.protocols import TrainerStore

TB_TAG = "videos/policy"


def show(
    cfg: Config,
    store: TrainerStore,
    logger: Logger,
    iteration: int,
    step: int,
    segments: list[Segment],
    point: tuple[list[float], np.ndarray | None, float | None],
    clips_logged: int,
) -> int:
    """One iteration's share: the curve point (episode returns, learned segment returns,
    held-out accuracy); a clip when one is due (--policy-clip-every), the clips drawn since
    ``clips_logged`` into TensorBoard, and with human feedback the labellers' figures. Returns the
    newest clip logged."""
    record_point(store, iteration, step, *point)
    every = cfg.clip_every()
    if clip_due(iteration, every):
        queue_clip(store, segments, iteration, step)
    if cfg.feedback == "human":
        if cfg.web.labeller or cfg.web.labellers_file:
            log_labellers(logger, store, step)
    elif every > 0:  # no page shows a failed render here: say it once, train on
        warn_failed_clip(logger, store)
    return log_clips(logger, store, clips_logged)


def show_last(cfg: Config, store: TrainerStore, logger: Logger, clips_logged: int) -> int:
    """At the end of a run: the clips drawn since the last iteration (and, without a page, the
    warning if none could be drawn). Returns the newest clip logged."""
    if cfg.feedback != "human" and cfg.clip_every() > 0:
        warn_failed_clip(logger, store)
    return log_clips(logger, store, clips_logged)


def warn_failed_clip(logger: Logger, store: TrainerStore) -> None:
    """One line, once per run, the first time a policy clip could not be drawn (e.g. no GL)."""
    error = store.policy_clip_error()
    if error is None or store.get_meta(CLIP_WARNED_META):
        return
    store.set_meta(CLIP_WARNED_META, True)
    logger.message(
        f"warning: policy clips cannot be drawn for TensorBoard ({error}); training goes on"
    )


def clip_due(iteration: int, every: int) -> bool:
    """Iterations 1, 1 + every, 1 + 2 * every ... (the first early, so the page shows one soon)."""
    return every > 0 and (iteration - 1) % every == 0


def queue_clip(store: TrainerStore, segments: list[Segment], iteration: int, step: int) -> None:
    """Queue the first of this rollout's segments (cut at random places) as the policy's clip."""
    if segments:
        store.add_policy_clip(segments[0], iteration, step)


def record_point(
    store: TrainerStore,
    iteration: int,
    step: int,
    episode_returns: list[float],
    learned_returns: np.ndarray | None,
    accuracy: float | None,
) -> None:
    """One point of the page's curve: the true return of the episodes that ended in this
    rollout (None if none did), the learned reward's mean segment return, the held-out accuracy."""
    true = float(np.mean(episode_returns)) if episode_returns else None
    learned = None
    if learned_returns is not None and len(learned_returns):
        learned = float(np.mean(learned_returns))
    store.add_curve_point(CurvePoint(iteration, step, true, learned, accuracy))


def log_clips(logger: Logger, store: TrainerStore, after: int) -> int:
    """Log the clips drawn since clip id ``after`` under ``videos/policy`` (at the env step each
    shows); returns the newest id logged."""
    for clip in store.policy_clips(ready_after=after):
        after = clip.id
        gif = Path(clip.video_path or "").with_suffix(".gif")
        try:
            data = gif.read_bytes()
        except OSError:  # removed meanwhile: the page had it; nothing to log
            continue
        width, height = int.from_bytes(data[6:8], "little"), int.from_bytes(data[8:10], "little")
        logger.gif(TB_TAG, data, height, width, clip.env_step)
    return after


def log_labellers(logger: Logger, store: TrainerStore, step: int) -> None:
    """Labels per named labeller and their agreement on the pairs two of them judged."""
    stats = store.labeller_stats()
    for name, count in stats.labels:
        logger.scalar(f"labellers/labels/{name}", count, step)
    if stats.agreement is not None:
        logger.scalar("labellers/agreement", stats.agreement, step)
        logger.scalar("labellers/compared", stats.compared, step)
