"""The jobs of bench_pebble.py: a task and its arms, one run's settings as a Job (its key names
its result's file), a job run (a Ray task's work, going on from its checkpoint where a stopped
grid left one) with its Result saved as soon as it ends, and the results saved read back.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
from _bench_grid import settings_from_json, with_settings

from rlhf.agent.precision import cpu_name
from rlhf.config import Config, ConfigError
from rlhf.config.presets import RUN_FILLED_QUERY, SAC
from rlhf.envs import dmc
from rlhf.sweep.grid import cell_name
from rlhf.sweep.worker import read_curve

ARMS = ("sac", "pebble", "ppo")
"""SAC on the env's reward, PEBBLE (SAC) on labels, PPO on the same labels."""
PEBBLE_QUERIES = tuple((f"query.{key}", getattr(SAC, key)) for key in RUN_FILLED_QUERY)
"""The pebble arm's query settings by default (rlhf/config/presets.py): QPA's queries."""
PEBBLE_FIT = f"e{SAC.min_epoch_steps}__{cell_name(PEBBLE_QUERIES)}"
"""In the pebble arm's result keys: the gradient steps its reward rounds make at least an
epoch, and its query settings, SAC's defaults. Results from before a default changed keep
keys without it (one step: no ``e``; 2000 segments ranked by disagreement: ``e32`` alone), so
a result never stands for a fit it did not run; runs that set today's defaults by --set (before
they were the defaults) have today's keys."""


def beyond_defaults(settings: tuple[tuple[str, Any], ...]) -> tuple[tuple[str, Any], ...]:
    """The pebble arm's ``settings`` less those that repeat its defaults (PEBBLE_QUERIES)."""
    return tuple(item for item in settings if item not in PEBBLE_QUERIES)


@dataclass(frozen=True)
class Task:
    env_id: str
    steps: int
    labels: int
    target: str | None = None
    """A target behaviour (--target) as the task's true reward; None: the env's."""

    @property
    def name(self) -> str:
        """The task as the table and the plot name it."""
        return self.env_id + (f" {self.target}" if self.target else "")

    def has(self, job: Job) -> bool:
        """Whether ``job`` is one of this task's runs."""
        return (job.env_id, job.target) == (self.env_id, self.target)

    @property
    def arms(self) -> tuple[str, ...]:
        """PPO-RLHF beside the MuJoCo tasks only (the issue sets DMC's against SAC alone)."""
        return ARMS[:2] if dmc.is_dmc(self.env_id) else ARMS


@dataclass(frozen=True)
class Job:
    env_id: str
    arm: str
    seed: int
    steps: int
    labels: int
    """The task's label budget (the sac arm's runs have none: 0)."""
    mistake: float
    quick: bool
    out: str
    hidden_dtype: str = "float32"
    settings: tuple[tuple[str, Any], ...] = ()
    """The pebble arm's further rlhf train settings (--set), as (config path, value)."""
    target: str | None = None
    """The task's target behaviour (--target); None: the env's own reward."""

    @property
    def key(self) -> str:
        env = self.env_id.replace("/", "+")
        if self.target:
            env += f"__{cell_name((('target', self.target),))}"
        key = f"{env}__{self.arm}__{self.seed}__{self.steps}"
        if self.arm != "sac":
            key += f"__{self.labels}" + (f"__m{self.mistake:g}" if self.mistake else "")
        if self.arm == "pebble":
            key += f"__{PEBBLE_FIT}"
        if self.settings:
            key += f"__{cell_name(self.settings)}"
        if self.arm != "ppo":  # PPO has no such setting
            key += f"__{self.hidden_dtype}"
        return key + ("__quick" if self.quick else "")


@dataclass(frozen=True)
class Result:
    job: Job
    final_return: float
    sps: float
    curve: list[tuple[int, float]]
    cpu: str = ""
    """The CPU the run ran on (:func:`rlhf.agent.precision.cpu_name`; empty in results written before it was kept):
    a run repeats bit for bit on one machine only, so the table names each row's machines."""


def train(job: Job) -> Result:
    import torch

    from rlhf.config import QueryConfig, RewardConfig, SACConfig, TeacherConfig
    from rlhf.run.runner import run

    torch.set_num_threads(1)
    sac = SACConfig(hidden_dtype=job.hidden_dtype)  # type: ignore[arg-type]
    reward = RewardConfig()
    if job.quick:
        sac = SACConfig(learning_starts=600, pretrain_steps=200, hidden_dtype=job.hidden_dtype)  # type: ignore[arg-type]
        # A smoke check: SAC's full reward rounds (100 epochs of 32 steps) would be most of it.
        reward = RewardConfig(max_epochs=2)
    cfg = Config(
        env_id=job.env_id, algo="ppo" if job.arm == "ppo" else "sac", seed=job.seed,
        total_timesteps=job.steps, reward="env" if job.arm == "sac" else "learned",
        feedback="synthetic", runs_dir=job.out, run_name=job.key, progress=False, sac=sac,
        device="cpu", query=QueryConfig(total_labels=max(job.labels, 1)), reward_model=reward,
        teacher=TeacherConfig(mistake=job.mistake, target=job.target),
    )  # fmt: skip
    summary = run(resumed_or_fresh(with_settings(cfg, job.settings), Path(job.out) / job.key))
    tb = Path(job.out) / job.key / "tb"
    curve = [(int(step), float(value)) for step, value in read_curve(tb)]
    end = min(job.steps, summary.env_steps)  # less where --set max-minutes=N ended it first
    late = [value for step, value in curve if step >= 0.9 * end]
    final = float(np.mean(late)) if late else float(summary.final_true_return or float("nan"))
    result = Result(job, final, summary.sps, curve, cpu_name())
    # Saved by the run itself, so a stopped grid keeps every finished run.
    results = Path(job.out) / "results"
    results.mkdir(exist_ok=True)
    tmp = results / f".{job.key}.tmp"
    tmp.write_text(json.dumps(asdict(result)))
    tmp.replace(results / f"{job.key}.json")
    return result


def resumed_or_fresh(cfg: Config, run_dir: Path) -> Config:
    """``cfg`` continuing ``run_dir`` from its last checkpoint where a stopped grid left one (a
    300k run takes most of an hour here), else ``cfg`` in an emptied ``run_dir``."""
    from rlhf.run.resume import resume_state
    from rlhf.run.run_dir import RunDir, busy, is_trainer_running

    if is_trainer_running(RunDir(run_dir)):  # another invocation's run: never removed
        raise busy(RunDir(run_dir))
    if (run_dir / "checkpoints").is_dir():
        resumed = replace(cfg, resume=str(run_dir))
        try:
            step = (resume_state(resumed) or {}).get("progress", {}).get("env_steps")
        except ConfigError as exc:  # a damaged checkpoint: the run starts again
            print(f"{run_dir.name}: starting again ({exc})", flush=True)
        else:
            if step:
                print(f"{run_dir.name}: resuming from its checkpoint at step {step:,}", flush=True)
                return resumed
    shutil.rmtree(run_dir, ignore_errors=True)
    return cfg


def load(out: Path) -> dict[str, Result]:
    """Finished runs in ``out`` by key (files of the earlier arms, pebble100 and the like, are
    left alone: their keys never match a job of today's). A result belongs to the directory it
    is read from, whatever ``out`` it was written in (results move: benchmarks/README.md)."""
    done: dict[str, Result] = {}
    for path in sorted((out / "results").glob("*.json")):
        data = json.loads(path.read_text())
        try:
            job = data["job"] | {
                "out": str(out),
                "settings": beyond_defaults(settings_from_json(data["job"].get("settings", []))),
            }
            result = Result(**{**data, "job": Job(**job)})
        except TypeError:
            continue
        # By the key it was written under: a result from before a default changed keeps the
        # old default's key (PEBBLE_FIT), which no job of today's has.
        done[path.stem] = result
    return done
