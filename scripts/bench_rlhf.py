"""Benchmark: RLHF with synthetic oracle labels vs PPO on the true reward, per env, one invocation.

For each env and seed, trains twice: PPO on the env's reward with the standard env (the upper
baseline) and RLHF with 700 oracle labels (``--feedback synthetic``: the learned reward only, never
the env's; terminations handled as ``rlhf train`` does by default). Runs are Ray tasks (one CPU and
one torch thread each, ``--jobs`` at a time; see rlhf.sweep). Each finished run saves its result
in ``--out`` (a directory, one JSON file per run), and an invocation skips the runs already
there, so a long grid can be stopped and continued. Prints one row per env (final true return mean +- std of each, the
ratio, steps/s), writes a grid of learning curves (one panel per env), and prints the headline
figures as the last line.

"Final" return: the mean true return of the episodes that end in the last 10% of the run's steps
(the standard env's return, whatever the run trains on).

    .venv/bin/python scripts/bench_rlhf.py                                   # HalfCheetah, 300k
    .venv/bin/python scripts/bench_rlhf.py --steps 1000000 --env-id HalfCheetah-v5 Hopper-v5 \\
        Walker2d-v5 Ant-v5 Swimmer-v5
    .venv/bin/python scripts/bench_rlhf.py --quick                           # smoke check, Hopper
    .venv/bin/python scripts/bench_rlhf.py --feedback-kind pairs ratings     # + 700 ratings
    .venv/bin/python scripts/bench_rlhf.py --env-id Ant-v5 --init-log-std 0 --replay-share 0
                                        # Ant without its preset (rlhf/config/presets.py)
    .venv/bin/python scripts/bench_rlhf.py --end-value absorbing  # as before --end-value zero
    .venv/bin/python scripts/bench_rlhf.py --env-id Hopper-v5 --end-margin 0  # without its preset
    .venv/bin/python scripts/bench_rlhf.py --env-id Walker2d-v5 --set query.segment-length=25
                                        # any other rlhf train setting, for the RLHF runs

Needs the bench extra (matplotlib): scripts/setup.sh bench
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np

from rlhf.config import Config, ConfigError, PPOConfig, QueryConfig
from rlhf.config.presets import with_preset
from rlhf.sweep import run_jobs
from rlhf.sweep.grid import cell_name
from rlhf.sweep.spec import SpecError, key_name, nested, settings_from_flags
from rlhf.sweep.worker import read_curve

ROOT = Path(__file__).resolve().parent.parent
MODES = ("ppo", "rlhf")
KIND_MODES = {"pairs": "rlhf", "ratings": "ratings", "both": "both"}
"""--feedback-kind -> the mode of its runs ("rlhf": pairs, the name results on disk already use)."""
LEARNED = {"rlhf": "pairs", "ratings": "ratings", "both": "both"}
"""Learned-reward mode -> the run's --feedback-kind."""


@dataclass(frozen=True)
class Job:
    env_id: str
    mode: str
    seed: int
    steps: int
    labels: int
    init_log_std: float = 0.0
    """PPO's --init-log-std, the same for both modes."""
    replay_share: float = 0.0
    """RLHF's --query.replay-share (results saved before it existed ran without replays)."""
    end_value: Literal["zero", "absorbing"] = "absorbing"
    """RLHF's --end-value (results saved before it existed ran with absorbing; PPO on the true
    reward has no learned end, so its jobs keep absorbing and their results stay valid)."""
    end_margin: float = 0.0
    """RLHF's --end-margin (results saved before it existed ran with 0)."""
    settings: tuple[tuple[str, Any], ...] = ()
    """RLHF's further rlhf train settings (--set), as (config path, value)."""

    @property
    def key(self) -> str:
        """The result's file name: settings that differ from the general defaults (or, for the
        end value, from what results saved before it ran with) are in it, so a cached result is
        reused only for the same settings."""
        key = f"{self.env_id}__{self.mode}__{self.seed}__{self.steps}__{self.labels}"
        key += f"__logstd{self.init_log_std:g}" if self.init_log_std else ""
        key += f"__end{self.end_value}" if self.end_value != "absorbing" else ""
        key += f"__margin{self.end_margin:g}" if self.end_margin else ""
        key += f"__replay{self.replay_share:g}" if self.replay_share else ""
        return key + (f"__{cell_name(self.settings)}" if self.settings else "")


OWN = {
    "env_id": "--env-id",
    "seed": "--seeds",
    "total_timesteps": "--steps",
    "query.total_labels": "--labels",
    "feedback_kind": "--feedback-kind",
    "ppo.init_log_std": "--init-log-std",
    "ppo.end_value": "--end-value",
    "ppo.end_margin": "--end-margin",
    "query.replay_share": "--replay-share",
}
"""Settings with a benchmark flag of their own (--set refuses them and names it)."""
FIXED = ("reward", "feedback", "reward_model_file", "labels_from", "resume", "progress", "device")
"""Settings the benchmark needs as they are (what it compares, and how its runs run)."""


def with_settings(cfg: Config, settings: tuple[tuple[str, Any], ...]) -> Config:
    """``cfg`` with each (config path, value) of ``settings`` set (paths are at most one
    section deep)."""
    data = cfg.to_dict()
    for key, value in nested(dict(settings)).items():
        data[key] = {**data[key], **value} if isinstance(value, dict) else value
    return Config.from_dict(data)


def _set_flags(items: list[str]) -> tuple[tuple[str, Any], ...]:
    """--set KEY=VALUE flags as checked settings; SpecError (one line) for a bad or owned key."""
    settings = settings_from_flags(items, "--set")
    for path, _ in settings:
        if path in OWN:
            raise SpecError(f"--set {key_name(path)}: the benchmark sets it; use its {OWN[path]}")
        if path in FIXED:
            raise SpecError(f"--set {key_name(path)}: the benchmark sets it to compare its runs")
    try:  # out of range (--set gamma=2) is refused here, not by every RLHF run after PPO's
        with_settings(Config(), settings).validate()
    except ConfigError as exc:
        raise SpecError(f"--set: {exc}") from None
    return settings


def _settings(
    env_id: str,
    mode: str,
    log_std: float | None,
    share: float | None,
    margin: float | None,
    settings: tuple[tuple[str, Any], ...] = (),
) -> dict[str, float]:
    """--init-log-std, --query.replay-share and --end-margin as ``rlhf train`` resolves them for
    this job (with its --set settings): a value not given takes the env's preset
    (rlhf.config.presets.with_preset decides, as in a run)."""
    cfg = Config(
        env_id=env_id,
        reward="env" if mode == "ppo" else "learned",
        ppo=PPOConfig(init_log_std=log_std, end_margin=margin),
        query=QueryConfig(replay_share=share),
    )
    resolved, _ = with_preset(with_settings(cfg, settings))
    return {
        "init_log_std": resolved.ppo.init_log_std or 0.0,
        "replay_share": resolved.query.replay_share or 0.0,
        "end_margin": resolved.ppo.end_margin or 0.0,
    }


@dataclass(frozen=True)
class Result:
    job: Job
    seconds: float
    final_return: float
    labels: int
    val_accuracy: float | None
    curve: list[tuple[int, float]]

    @property
    def sps(self) -> float:
        return self.job.steps / self.seconds


def _job(args: tuple[Job, Path]) -> Result:
    job, out = args
    result = _train(job)
    # Saved by the run itself, so an interrupted grid keeps every finished run.
    tmp = out / f".{job.key}.tmp"
    tmp.write_text(json.dumps(asdict(result)))
    tmp.replace(out / f"{job.key}.json")
    return result


def _train(job: Job) -> Result:
    import torch

    from rlhf.run.runner import run

    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as runs:
        cfg = Config(
            env_id=job.env_id,
            total_timesteps=job.steps,
            seed=job.seed,
            reward="env" if job.mode == "ppo" else "learned",
            feedback="synthetic",
            feedback_kind=LEARNED.get(job.mode, "pairs"),  # type: ignore[arg-type]
            runs_dir=runs,
            run_name="bench",
            progress=False,
            device="cpu",
            query=QueryConfig(total_labels=job.labels, replay_share=job.replay_share),
            ppo=PPOConfig(
                init_log_std=job.init_log_std, end_value=job.end_value, end_margin=job.end_margin
            ),
        )
        summary = run(with_settings(cfg, job.settings))
        curve = list(read_curve(Path(runs) / "bench" / "tb"))
    tail = [ret for step, ret in curve if step > 0.9 * job.steps]
    final = float(np.mean(tail)) if tail else summary.final_true_return or float("nan")
    return Result(
        job, summary.wall_seconds, final, summary.labels_used, summary.reward_val_accuracy, curve
    )


def _load(out: Path) -> dict[str, Result]:
    done: dict[str, Result] = {}
    for path in sorted(out.glob("*.json")):
        data = json.loads(path.read_text())
        job = data["job"]  # JSON made the settings' tuples lists
        settings = [(k, tuple(v) if isinstance(v, list) else v) for k, v in job.get("settings", [])]
        result = Result(**{**data, "job": Job(**{**job, "settings": tuple(settings)})})
        done[result.job.key] = result
    return done


def _smoothed(curve: list[tuple[int, float]], grid: np.ndarray, window: float) -> list[float]:
    if not curve:
        return [np.nan] * len(grid)
    xs, ys = np.array(curve).T
    out = []
    for g in grid:
        inside = (xs > g - window) & (xs <= g)
        out.append(ys[inside].mean() if inside.any() else np.nan)
    return out


def _plot(results: list[Result], envs: list[str], steps: int, labels: int, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cols = min(3, len(envs))
    rows = -(-len(envs) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(5 * cols, 3.6 * rows), dpi=110, squeeze=False)
    grid = np.linspace(0, steps, 41)[1:]
    for ax, env_id in zip(axes.flat, envs, strict=False):
        for mode, name, color in (
            ("ppo", "PPO, true reward", "tab:gray"),
            ("rlhf", f"RLHF, {labels} oracle labels", "tab:blue"),
        ):
            mine = [r for r in results if r.job.env_id == env_id and r.job.mode == mode]
            if not mine:
                continue
            arr = np.array([_smoothed(r.curve, grid, 0.05 * steps) for r in mine])
            mean, std = np.nanmean(arr, 0), np.nanstd(arr, 0)
            ax.plot(grid, mean, color=color, label=name)
            ax.fill_between(grid, mean - std, mean + std, color=color, alpha=0.2)
        seeds = len({r.job.seed for r in results if r.job.env_id == env_id})
        ax.set_title(f"{env_id} ({seeds} seeds)")
        ax.set_xlabel("environment steps")
        ax.set_ylabel("true episodic return")
        ax.grid(alpha=0.3)
    for ax in list(axes.flat)[len(envs) :]:
        ax.axis("off")
    axes.flat[0].legend(loc="upper left", fontsize=8)
    fig.suptitle("mean ± std over seeds")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)


def _row(results: list[Result], env_id: str, modes: tuple[str, ...]) -> dict[str, float]:
    row: dict[str, float] = {}
    for mode in modes:
        mine = [r for r in results if r.job.env_id == env_id and r.job.mode == mode]
        finals = [r.final_return for r in mine]
        row[f"{mode}_return"] = statistics.mean(finals)
        row[f"{mode}_std"] = statistics.stdev(finals) if len(finals) > 1 else 0.0
        row[f"{mode}_sps"] = statistics.median(r.sps for r in mine)
    ppo = row["ppo_return"]
    for mode in modes[1:]:
        suffix = "" if mode == "rlhf" else f"_{mode}"
        row[f"ratio{suffix}"] = row[f"{mode}_return"] / ppo if ppo > 0 else float("nan")
        accs = [
            r.val_accuracy
            for r in results
            if r.job.env_id == env_id and r.job.mode == mode and r.val_accuracy is not None
        ]
        row[f"val_acc{suffix}"] = statistics.mean(accs) if accs else float("nan")
    return row


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--steps", type=int, default=300_000, help="env steps per run")
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--labels", type=int, default=700, help="oracle labels per RLHF run")
    parser.add_argument(
        "--env-id",
        nargs="+",
        default=None,
        help="one or more envs (default: HalfCheetah-v5; --quick: Hopper-v5)",
    )
    parser.add_argument("--jobs", type=int, default=2, help="runs in parallel (one core each)")
    parser.add_argument("--out", type=Path, default=None, help="results directory")
    parser.add_argument("--plot", type=Path, default=None, help="learning-curve grid (PNG)")
    parser.add_argument(
        "--quick", action="store_true", help="20k steps, 1 seed, 100 labels, Hopper-v5"
    )
    parser.add_argument(
        "--feedback-kind",
        nargs="+",
        choices=list(KIND_MODES),
        default=["pairs"],
        help="RLHF rows: pairs, and/or ratings (the same number of graded clips), and/or both",
    )
    parser.add_argument(
        "--init-log-std",
        type=float,
        default=None,
        help="PPO's initial log std of actions, for both PPO and RLHF (rlhf train"
        " --init-log-std; default: the env's preset, -1 on Ant, else 0)",
    )
    parser.add_argument(
        "--end-value",
        choices=("zero", "absorbing"),
        default="zero",
        help="RLHF's value of an episode's end (rlhf train --end-value; absorbing: as before"
        " it existed)",
    )
    parser.add_argument(
        "--end-margin",
        type=float,
        default=None,
        help="how far below its learned reward RLHF counts an episode's end, per step (rlhf"
        " train --end-margin; default: the env's preset, 0.3 on Hopper, else 0)",
    )
    parser.add_argument(
        "--replay-share",
        type=float,
        default=None,
        help="RLHF's share of replayed pairs (rlhf train --query.replay-share; default: the"
        " env's preset, 0.3 on Ant, else 0)",
    )
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a further rlhf train setting of the RLHF runs, e.g. --set query.segment-length=25"
        " (repeatable; keys and values as rlhf sweep --train takes them); the true-reward PPO"
        " runs stay as they are",
    )
    args = parser.parse_args()
    try:
        extra = _set_flags(args.set)
    except SpecError as exc:
        parser.error(str(exc))
    # --quick runs Hopper: its returns are above zero from the start (a healthy reward per step),
    # so 20k steps give a ratio; HalfCheetah's PPO is still below zero there (no ratio: nan).
    args.env_id = args.env_id or ["Hopper-v5" if args.quick else "HalfCheetah-v5"]
    modes = ("ppo", *dict.fromkeys(KIND_MODES[k] for k in args.feedback_kind))
    steps, seeds, labels = (
        (20_480, [1], 100) if args.quick else (args.steps, args.seeds, args.labels)
    )
    out = args.out or Path(tempfile.gettempdir()) / f"bench_rlhf_{steps}"
    out.mkdir(parents=True, exist_ok=True)
    plot = args.plot or ROOT / "docs" / "images" / f"rlhf_vs_ppo_{steps // 1000}k.png"
    jobs = [
        Job(
            env_id,
            mode,
            seed,
            steps,
            labels,
            end_value="absorbing" if mode == "ppo" else args.end_value,
            settings=mine,
            **_settings(env_id, mode, args.init_log_std, args.replay_share, args.end_margin, mine),
        )
        for env_id in args.env_id
        for seed in seeds
        for mode in modes
        for mine in [() if mode == "ppo" else extra]  # --set is for the RLHF runs only
    ]
    done = _load(out)
    todo = [job for job in jobs if job.key not in done]
    print(f"{len(jobs) - len(todo)} runs already in {out}; {len(todo)} to run", flush=True)
    if todo:  # no Ray start-up when every run is already there
        for result in run_jobs(
            _job,
            [(job, out) for job in todo],
            args.jobs,
            describe=lambda r: (
                f"{r.job.env_id} {r.job.mode} seed {r.job.seed}: {r.final_return:.0f}"
            ),
        ):
            done[result.job.key] = result
    results = [done[job.key] for job in jobs]
    rows = {env_id: _row(results, env_id, modes) for env_id in args.env_id}
    _table(rows, modes)
    if not args.quick and modes == MODES:
        _plot(results, args.env_id, steps, labels, plot)
        print(f"plot: {plot}")
    figures = []
    for mode in modes[1:]:
        key = "ratio" if mode == "rlhf" else f"ratio_{mode}"
        figures += [f"{key}_{e.split('-')[0]}={r[key]:.2f}" for e, r in rows.items()]
    # An env where PPO itself ends below zero has no ratio (nan); it is left out of the minimum.
    finite = [r["ratio"] for r in rows.values() if "ratio" in r and np.isfinite(r["ratio"])]
    print(
        f"{' '.join(figures)} ratio_min={min(finite, default=float('nan')):.2f}"
        f" steps={steps} seeds={len(seeds)} labels={labels}"
    )


def _table(rows: dict[str, dict[str, float]], modes: tuple[str, ...]) -> None:
    """One row per env: final true return of each mode, its ratio to PPO and held-out accuracy
    (ratings runs: accuracy on held-out pairs is NaN, they have none), steps/s."""
    names = {"ppo": "PPO (true reward)", "rlhf": "RLHF pairs", "ratings": "RLHF ratings"}
    head = f"\n{'env':24}" + "".join(f" {names.get(m, 'RLHF ' + m):>18}" for m in modes)
    head += "".join(f" {'ratio ' + m:>13} {'val acc':>7}" for m in modes[1:])
    print(head + "".join(f" {'sps ' + m:>12}" for m in modes))
    for env_id, row in rows.items():
        line = f"{env_id:24}" + "".join(
            f" {row[m + '_return']:>10.0f} ± {row[m + '_std']:<5.0f}" for m in modes
        )
        for m in modes[1:]:
            suffix = "" if m == "rlhf" else f"_{m}"
            line += f" {row['ratio' + suffix]:>13.2f} {row['val_acc' + suffix]:>7.2f}"
        print(line + "".join(f" {row[m + '_sps']:>12.0f}" for m in modes))


if __name__ == "__main__":
    main()
