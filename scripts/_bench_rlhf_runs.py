"""The runs of bench_rlhf.py: one job trained (a Ray task's work), its Result saved in --out as
soon as it ends, and the results saved there read back.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
from _bench_grid import settings_from_json, with_settings
from _bench_rlhf_jobs import LEARNED, Job

from rlhf.config import Config, PPOConfig, QueryConfig
from rlhf.sweep.worker import read_scalars

RUNS = "runs"
"""With --keep-runs, the folder of --out that keeps every run's directory."""


@dataclass(frozen=True)
class Result:
    job: Job
    seconds: float
    """The run's wall time (its summary.json's wall_seconds)."""
    final_return: float
    labels: int
    """Labels its reward was fitted on (summary.json's labels_used; PPO: 0)."""
    val_accuracy: float | None
    curve: list[tuple[int, float]]
    final_length: float | None = None
    """The mean length of the same episodes as ``final_return`` (None in results saved before
    it was kept)."""

    @property
    def sps(self) -> float:
        return self.job.steps / self.seconds


def run_job(args: tuple[Job, Path, bool]) -> Result:
    job, out, keep = args
    result = train(job, out / RUNS if keep else None)
    # Saved by the run itself, so an interrupted grid keeps every finished run.
    tmp = out / f".{job.key}.tmp"
    tmp.write_text(json.dumps(asdict(result)))
    tmp.replace(out / f"{job.key}.json")
    return result


def train(job: Job, keep: Path | None = None) -> Result:
    """Run ``job``; its run directory (TensorBoard, labels, checkpoints) goes into ``keep``
    under the job's key, or into a temporary directory that is removed afterwards (None)."""
    import torch

    from rlhf.run.runner import run

    torch.set_num_threads(1)
    with _runs_dir(job, keep) as runs:
        cfg = Config(
            env_id=job.env_id,
            total_timesteps=job.steps,
            seed=job.seed,
            reward="env" if job.mode == "ppo" else "learned",
            feedback="synthetic",
            feedback_kind=LEARNED.get(job.mode, "pairs"),  # type: ignore[arg-type]
            runs_dir=runs,
            run_name=job.key if keep else "bench",
            progress=False,
            device="cpu",
            query=QueryConfig(total_labels=job.labels, replay_share=job.replay_share),
            ppo=PPOConfig(
                init_log_std=job.init_log_std, end_value=job.end_value, end_margin=job.end_margin
            ),
        )
        summary = run(with_settings(cfg, job.run_settings))
        tb = Path(runs) / cfg.run_name / "tb"
        read = read_scalars(tb, "charts/episodic_return", "charts/episodic_length")
        curve, lengths = list(read["charts/episodic_return"]), read["charts/episodic_length"]
    end = min(job.steps, summary.env_steps)  # less where --set max-minutes=N ended it first
    tail = [ret for step, ret in curve if step > 0.9 * end]
    final = float(np.mean(tail)) if tail else summary.final_true_return or float("nan")
    steps = [n for step, n in lengths if step > 0.9 * end]
    return Result(
        job, summary.wall_seconds, final, summary.labels_used, summary.reward_val_accuracy, curve,
        float(np.mean(steps)) if steps else None,
    )  # fmt: skip


@contextmanager
def _runs_dir(job: Job, keep: Path | None) -> Iterator[str]:
    """Where ``job``'s run directory goes: ``keep`` (a directory left there by an interrupted
    grid is removed first: its result was never saved, so the job runs again from the start),
    or a temporary directory removed afterwards."""
    if keep is None:
        with tempfile.TemporaryDirectory() as runs:
            yield runs
        return
    shutil.rmtree(keep / job.key, ignore_errors=True)
    keep.mkdir(parents=True, exist_ok=True)
    yield str(keep)


def load(out: Path) -> dict[str, Result]:
    """The results saved in ``out`` by their key as today's Job makes it (a PPO result saved
    with a label budget in its file name serves under today's key, which has none)."""
    done: dict[str, Result] = {}
    for path in sorted(out.glob("*.json")):
        data = json.loads(path.read_text())
        job = data["job"]
        job |= {
            "settings": settings_from_json(job.get("settings", [])),
            "teacher": settings_from_json(job.get("teacher", [])),
        }
        result = Result(**{**data, "job": Job(**job)})
        done[result.job.key] = result
    return done
