"""Start or resume a run, train it, and stop in one of three ways.

* **finished**: the step budget (or ``--max-minutes``) is spent. The labelling page is told,
  answers still in flight are accepted for ``--finish-grace`` seconds, the reward is trained
  once more on every label, and the checkpoint, ``agent.pt``, ``reward_model.pt`` and
  ``summary.json`` are written.
* **interrupted** (Ctrl-C or SIGTERM): the current iteration ends, a checkpoint and ``agent.pt``
  are written, ``summary.json`` says ``"interrupted": true``, and :class:`RunInterrupted` carries
  the one line that says how to resume (the command line exits 130, or 143 for SIGTERM).
* **crashed** (an error): the page is told, ``summary.json`` records the error, and the last
  periodic checkpoint can be resumed.

``rlhf train --resume runs/NAME`` continues from ``checkpoints/last.pt``: same config (the budget
may grow), every label in the store (also those given through ``rlhf serve`` meanwhile), and the
TensorBoard curves continue from the checkpoint's step.
"""

from __future__ import annotations

import contextlib
import sqlite3
from dataclasses import dataclass, replace
from pathlib import Path

import torch

from rlhf.agent.precision import with_hidden_dtype
from rlhf.config import Config, flag
from rlhf.config.presets import idle_settings, with_preset
from rlhf.core.files import disk_full
from rlhf.core.status import Phase
from rlhf.data.seed_labels import (
    LabelsSource,
    check_labels_source,
    rating_levels,
    read_labels_source,
)
from rlhf.envs.user_reward import is_file
from rlhf.reward.saved import load_saved_reward
from rlhf.run import agent_view as view
from rlhf.run.lifecycle import (
    DiskFull,
    Progress,
    RunInterrupted,
    StopSignals,
    Summary,
    write_json_atomic,
)
from rlhf.run.logger import Logger
from rlhf.run.loop import fit_reward, train
from rlhf.run.offpolicy import train_offpolicy
from rlhf.run.preflight import RunPlan, preflight
from rlhf.run.resume import disk_full_line, resume_command, resume_hint, resume_state
from rlhf.run.run_dir import (
    RunDir,
    create_run_dir,
    removed_if_start_fails,
    stored_dict,
    trainer_lock,
    write_config,
)
from rlhf.run.trainer import (
    RewardFn,
    Trainer,
    build_trainer,
    publish,
    restore,
    restore_from_labels,
    save_models,
    write_checkpoint,
)

_INTERRUPT_GRACE = 3.0
"""Seconds an interrupted human run waits for answers in flight (the person asked to stop)."""


def run(cfg: Config, reward_fn: RewardFn | None = None) -> Summary:
    """Train according to ``cfg`` (a new run, or continue ``cfg.resume``); returns the summary.

    Args:
        cfg: the run configuration.
        reward_fn: optional ``(obs, actions) -> rewards`` on raw observations and applied
            actions; when given, PPO trains on it instead of ``cfg.reward``.

    Raises:
        RunInterrupted: Ctrl-C or SIGTERM stopped the run after it saved a checkpoint.
        ConfigError: a bad configuration, or nothing to resume (a one-line message).
    """
    cfg.validate()
    cfg = _absolute_paths(cfg)  # config.json must name the same files from any directory
    idle = idle_settings(cfg)
    cfg, preset = with_preset(cfg)  # stored as used, so a resume keeps it
    cfg, precision = with_hidden_dtype(cfg)  # likewise: a resume multiplies as it started
    plan = preflight(cfg)  # what cannot work is one line, before a run directory exists
    torch.set_num_threads(cfg.torch_threads)
    state = resume_state(cfg)
    labels: LabelsSource | None = None  # read once here, copied into the store when it opens
    if reward_fn is None and cfg.reward_model_file is not None:
        env = plan.env
        reward_fn = load_saved_reward(
            Path(cfg.reward_model_file), cfg.env_id, env.obs_dim, env.act_dim
        )
    elif cfg.labels_from is not None and not state:  # a checkpointed run has them already
        labels = read_labels_source(Path(cfg.labels_from))
        check_labels_source(labels, cfg.env_id, rating_levels(cfg))
    if state is None:
        run_dir, progress = create_run_dir(cfg), Progress()
    else:
        run_dir = RunDir(Path(cfg.resume))  # type: ignore[arg-type]
        progress = Progress.from_state_dict(state["progress"]) if state else Progress()
        progress.sessions += 1
    session = Session(
        cfg, plan, run_dir, progress, state, reward_fn, labels, [preset, precision, *idle]
    )
    try:
        return _session(session)
    except (OSError, sqlite3.Error) as exc:
        full = disk_full(exc)
        if full is None:
            raise
        raise DiskFull(disk_full_line(run_dir.root, full)) from exc


@dataclass(frozen=True)
class Session:
    """What :func:`run` resolved before the session's parts are built."""

    cfg: Config
    plan: RunPlan
    run_dir: RunDir
    progress: Progress
    state: dict | None
    """The checkpoint resumed from; ``{}``: resumed from the labels alone; None: a new run."""
    reward_fn: RewardFn | None
    labels: LabelsSource | None
    messages: list[str | None]


def _session(s: Session) -> Summary:
    """Build the run's parts, make it resumable at once, train, and end it."""
    cfg, run_dir, progress, state = s.cfg, s.run_dir, s.progress, s.state
    total = -(-cfg.total_timesteps // cfg.batch_size) * cfg.batch_size
    with contextlib.ExitStack() as cleanup:
        # first in, last out: the directory goes after the lock and the logger let go of it
        started = cleanup.enter_context(removed_if_start_fails(run_dir, fresh=state is None))
        cleanup.enter_context(trainer_lock(run_dir))  # one trainer per run
        if state is not None:
            write_config(run_dir, cfg)  # the budget may have been raised
        logger = Logger(run_dir.tb, total, cfg.progress, start_step=progress.env_steps)
        cleanup.callback(logger.close)
        for line in filter(None, s.messages):
            logger.message(line)
        stop = cleanup.enter_context(StopSignals(logger.message))
        t = build_trainer(
            cfg, s.plan, run_dir, logger, stop, progress, s.reward_fn, cleanup, s.labels
        )
        if state is None:
            logger.hparams_text(stored_dict(cfg))
        elif state:
            restore(t, state)
            logger.message(f"resuming {run_dir.root} at step {progress.env_steps:,}")
        else:
            restore_from_labels(t)
            logger.message(
                f"resuming {run_dir.root} from its labels with a fresh agent (it stopped"
                " before its first checkpoint)"
            )
        if not state:  # resumable from here on, before the first label is asked
            write_checkpoint(t)
        started()
        return _live(t)
    raise AssertionError("unreachable")  # ExitStack does not swallow exceptions


def _absolute_paths(cfg: Config) -> Config:
    files = {"reward_model_file": cfg.reward_model_file, "labels_from": cfg.labels_from}
    cfg = replace(cfg, **{k: str(Path(v).resolve()) for k, v in files.items() if v is not None})
    spec = cfg.teacher.reward  # a file's MODULE:FUNCTION, so a resume finds the same file
    if spec is not None:
        module, _, name = spec.rpartition(":")
        if is_file(module):
            teacher = replace(cfg.teacher, reward=f"{Path(module).expanduser().resolve()}:{name}")
            cfg = replace(cfg, teacher=teacher)
    return cfg


def _live(t: Trainer) -> Summary:
    """Train, then end the run the way it ended."""
    try:
        train_offpolicy(t) if t.cfg.algo == "sac" else train(t)
    except KeyboardInterrupt:  # a second Ctrl-C: stop at once, without a new checkpoint
        _finish(t, Phase.INTERRUPTED, checkpoint=False)
        raise RunInterrupted(resume_hint(t), 130) from None
    except Exception as exc:
        with contextlib.suppress(Exception):  # never hide the error behind a second one
            _finish(t, Phase.CRASHED, error=" ".join(f"{type(exc).__name__}: {exc}".split()))
        raise
    if t.stop.requested:
        _finish(t, Phase.INTERRUPTED)
        raise RunInterrupted(resume_hint(t), t.stop.exit_code)
    return _finish(t, Phase.FINISHED)


def _finish(t: Trainer, phase: Phase, error: str | None = None, checkpoint: bool = True) -> Summary:
    """Save what the run has, tell the page, let answers in flight arrive, write the summary."""
    resume = resume_command(t.run_dir.root)
    close = t.prefs.feedback.close if t.prefs is not None else lambda grace: None
    longer = _longer(t, resume)
    if phase is Phase.FINISHED:
        publish(t, phase, "training has finished", resume_command=longer)
        if t.prefs is not None:  # answers in flight arrive; the page stays up for the summary
            t.prefs.feedback.drain(t.cfg.web.finish_grace)
        log_last_clips(t)  # those drawn while the source drained
        if t.prefs is not None:  # every label, those that arrived during the grace period too
            fit_reward(t.prefs, t.rngs["train"], final=True)
    elif phase is Phase.INTERRUPTED:
        if checkpoint:
            write_checkpoint(t)
        publish(t, phase, "the trainer was stopped; every label is kept", resume_command=resume)
        close(min(t.cfg.web.finish_grace, _INTERRUPT_GRACE))
    else:
        publish(t, phase, f"the trainer stopped with an error: {error}", resume_command=resume)
        close(0.0)
    if phase is Phase.FINISHED:
        write_checkpoint(t)
    if phase is not Phase.CRASHED and checkpoint:
        save_models(t)
    summary = _summary(t, phase, error)
    write_json_atomic(t.run_dir.summary, summary.__dict__)
    if phase is Phase.FINISHED:
        if t.status is not None:  # the page's final figures are summary.json's
            t.status.final(summary, longer)
        close(t.cfg.web.finish_grace)
        clock = ""
        if t.ended_on_time():
            clock = (
                f" at {flag('max_minutes')} {t.cfg.max_minutes:g} (step {t.progress.env_steps:,}"
                f" of {t.cfg.total_timesteps:,})"
            )
        t.logger.message(f"run finished{clock}: {t.run_dir.root} (summary.json)")
    return summary


def _longer(t: Trainer, resume: str) -> str:
    """The command that trains a finished run on, with twice the budget that ended it."""
    if t.ended_on_time():
        return f"{resume} {flag('max_minutes')} {2 * t.cfg.max_minutes:g}"
    return f"{resume} {flag('total_timesteps')} {2 * t.cfg.total_timesteps}"


def log_last_clips(t: Trainer) -> None:
    """Put in TensorBoard the policy clips drawn after the last iteration logged them."""
    if t.prefs is not None:
        t.clips_logged = view.show_last(t.cfg, t.prefs.store, t.logger, t.clips_logged)


def _summary(t: Trainer, phase: Phase, error: str | None) -> Summary:
    p, cfg, prefs = t.progress, t.cfg, t.prefs
    wall = t.train_seconds()
    return Summary(
        env_id=cfg.env_id,
        seed=cfg.seed,
        run_name=t.run_dir.name,
        reward=cfg.reward,
        feedback=cfg.feedback if prefs is not None else None,
        status=phase.value,
        interrupted=phase is Phase.INTERRUPTED,
        env_steps=p.env_steps,
        wall_seconds=round(wall, 2),
        sps=round(p.env_steps / max(wall, 1e-9), 1),
        final_true_return=p.mean_return,
        episodes=p.episodes,
        labels_used=0 if prefs is None else prefs.reward.fitted_on,
        reward_val_accuracy=None if prefs is None else prefs.reward.held_out_accuracy,
        sessions=p.sessions,
        error=error,
        final_success_rate=p.success_rate,
        replay_steps=p.replay_steps,
        target=cfg.teacher.target_name,
        final_target_return=p.mean_return if cfg.teacher.target_name else None,
        final_env_return=p.mean_env_return,
        ended_on_time=phase is Phase.FINISHED and t.ended_on_time(),
    )
