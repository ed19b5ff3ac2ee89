"""Benchmark: PEBBLE (SAC + synthetic labels) vs SAC on the true reward vs PPO-RLHF, per task.

The off-policy issue's targets, each a task (an env, a step budget and a label budget) run with
three arms on the same seeds: SAC on the env's reward (``sac``, the upper baseline), PEBBLE with
the task's labels (``pebble``: ``--algo sac --feedback synthetic``, unsupervised pretraining,
then the learned reward only) and PPO-RLHF with the same labels and steps (``ppo``, rlhf train's
default algorithm; MuJoCo tasks only):

| task | steps | labels | arms | target |
| --- | --- | --- | --- | --- |
| HalfCheetah-v5, Walker2d-v5 | 300k | 200 | sac, pebble, ppo | pebble >= 0.9 x sac, and > ppo |
| dm_control/walker-walk-v0 | 500k | 100 | sac, pebble | pebble >= 0.9 x sac (QPA's setting) |
| dm_control/cheetah-run-v0 | 500k | 250 | sac, pebble | pebble >= 0.9 x sac |

Runs are Ray tasks through :func:`rlhf.sweep.run_jobs` (one CPU and one torch thread each).
"Final" return: the mean true return of the episodes that end in the last 10% of a run's steps.
Prints one row per (task, arm): every seed's final return, mean +- std, the ratio to SAC on the
true reward, and whether the target holds; the headline ratios as the last line.

    .venv/bin/python scripts/bench_pebble.py --out benchmarks/pebble       # the MuJoCo targets
    .venv-dmc/bin/python scripts/bench_pebble.py --out benchmarks/pebble \\
        --env-id dm_control/walker-walk-v0 dm_control/cheetah-run-v0       # the DMC targets
    .venv/bin/python scripts/bench_pebble.py --steps 100000 --env-id HalfCheetah-v5  # smaller
    .venv/bin/python scripts/bench_pebble.py --env-id Hopper-v5 --labels 300 --mistake 0.1
    .venv/bin/python scripts/bench_pebble.py --env-id Ant-v5 --labels 200 --mistake 0.1 \
        --seed-set report --arms pebble      # a person's teacher, on the held-out seeds
    .venv/bin/python scripts/bench_pebble.py --env-id Hopper-v5 --target stand hop --steps 120000 \
        --labels 300 --mistake 0.1 --seed-set report      # behaviours no env rewards
    .venv/bin/python scripts/bench_pebble.py --quick            # smoke check (figures mean nothing)

DeepMind Control needs the dmc extra, which pins mujoco < 4 and so has a venv of its own
(``RLHF_VENV=.venv-dmc scripts/setup.sh dmc,bench``); run without it, the bench names the tasks
it leaves out and the command that runs them. ``--steps`` scales every task to one budget (the
largest this machine allows in the time at hand; the results name their budget, so runs of
several budgets never mix). ``--out DIR`` keeps one JSON file per finished run (its curve
included) and skips those runs on the next invocation, so a grid can be stopped and continued
(``benchmarks/pebble``: its results are committed, so the grid goes on on another machine; a
run stopped before its end goes on from its last checkpoint, written every five minutes; one
whose checkpoint is damaged starts again); both venvs can share one ``--out``. ``--arms`` runs
some arms only (``--arms pebble`` after a change to PEBBLE: the SAC runs kept in ``--out`` serve);
``--set KEY=VALUE`` runs the pebble arm with an rlhf train setting changed, a variant kept
under its own key beside the default's (``--arms pebble --set sac.recent-share=0.5``); one that
changes the task (``--set env-kwargs=JSON``) runs every arm with it. ``--target NAME`` makes a
target behaviour of the catalogue (``rlhf train --teacher.target``) the task's true reward: the
teacher's, SAC's (``sac``: SAC on the target's reward) and the table's; each target is a task of
its own (``none``: the env's own reward).
SAC's hidden layers run in what ``rlhf train`` picks (``--hidden-dtype auto``: bfloat16 where the
CPU multiplies it natively, about twice as fast: scripts/bench_sac.py; else float32); a run's
result names the dtype it used, so results from machines of either kind never mix, and keeps
the CPU it ran on (the table's last column): a run repeats bit for bit on one machine only.
"""

from __future__ import annotations

import argparse
import itertools
import json
import shutil
import statistics
import sys
import tempfile
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
from _bench_grid import (
    add_seed_flags,
    check_targets,
    choose_seeds,
    settings_from_json,
    task_settings,
    with_settings,
)

from rlhf.agent.precision import choose, cpu_name
from rlhf.config import Config, ConfigError
from rlhf.config.presets import RUN_FILLED_QUERY, SAC
from rlhf.envs import dmc
from rlhf.envs.goals import mujoco_release
from rlhf.sweep import run_jobs
from rlhf.sweep.grid import cell_name
from rlhf.sweep.spec import SpecError, key_name, settings_from_flags
from rlhf.sweep.worker import read_curve

ARMS = ("sac", "pebble", "ppo")
"""SAC on the env's reward, PEBBLE (SAC) on labels, PPO on the same labels."""
PASS_RATIO = 0.9
"""PEBBLE's final return over SAC's on the true reward that the off-policy issue asks for (a
bar, not a behaviour: "target" is --target's word here)."""
PEBBLE_QUERIES = tuple((f"query.{key}", getattr(SAC, key)) for key in RUN_FILLED_QUERY)
"""The pebble arm's query settings by default (rlhf/config/presets.py): QPA's queries."""
PEBBLE_FIT = f"e{SAC.min_epoch_steps}__{cell_name(PEBBLE_QUERIES)}"
"""In the pebble arm's result keys: the gradient steps its reward rounds make at least an
epoch, and its query settings, SAC's defaults. Results from before a default changed keep
keys without it (one step: no ``e``; 2000 segments ranked by disagreement: ``e32`` alone), so
a result never stands for a fit it did not run; runs that set today's defaults by --set (before
they were the defaults) have today's keys."""


def _beyond_defaults(settings: tuple[tuple[str, Any], ...]) -> tuple[tuple[str, Any], ...]:
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


TARGETS = (
    Task("HalfCheetah-v5", 300_000, 200),
    Task("Walker2d-v5", 300_000, 200),
    Task("dm_control/walker-walk-v0", 500_000, 100),
    Task("dm_control/cheetah-run-v0", 500_000, 250),
)
"""The off-policy issue's targets."""


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


def _train(job: Job) -> Result:
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
    summary = run(_resumed(with_settings(cfg, job.settings), Path(job.out) / job.key))
    tb = Path(job.out) / job.key / "tb"
    curve = [(int(step), float(value)) for step, value in read_curve(tb)]
    late = [value for step, value in curve if step >= 0.9 * job.steps]
    final = float(np.mean(late)) if late else float(summary.final_true_return or float("nan"))
    result = Result(job, final, summary.sps, curve, cpu_name())
    # Saved by the run itself, so a stopped grid keeps every finished run.
    results = Path(job.out) / "results"
    results.mkdir(exist_ok=True)
    tmp = results / f".{job.key}.tmp"
    tmp.write_text(json.dumps(asdict(result)))
    tmp.replace(results / f"{job.key}.json")
    return result


def _resumed(cfg: Config, run_dir: Path) -> Config:
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


def _load(out: Path) -> dict[str, Result]:
    """Finished runs in ``out`` by key (files of the earlier arms, pebble100 and the like, are
    left alone: their keys never match a job of today's). A result belongs to the directory it
    is read from, whatever ``out`` it was written in (results move: benchmarks/README.md)."""
    done: dict[str, Result] = {}
    for path in sorted((out / "results").glob("*.json")):
        data = json.loads(path.read_text())
        try:
            job = data["job"] | {
                "out": str(out),
                "settings": _beyond_defaults(settings_from_json(data["job"].get("settings", []))),
            }
            result = Result(**{**data, "job": Job(**job)})
        except TypeError:
            continue
        # By the key it was written under: a result from before a default changed keeps the
        # old default's key (PEBBLE_FIT), which no job of today's has.
        done[path.stem] = result
    return done


OWN = ("env_id", "seed", "total_timesteps", "algo", "reward", "feedback", "query.total_labels",
       "teacher.mistake", "teacher.target", "sac.hidden_dtype")  # fmt: skip
"""The settings the benchmark sets itself (by its own flags, or to compare its arms)."""


def _variant(items: list[str]) -> tuple[tuple[str, Any], ...]:
    """--set KEY=VALUE flags as checked settings; SpecError (one line) for a bad or owned key
    or a value out of range."""
    settings = settings_from_flags(items, "--set")
    for path, _ in settings:
        if path in OWN:
            raise SpecError(f"--set {key_name(path)}: the benchmark sets it")
    try:
        with_settings(Config(env_id="HalfCheetah-v5", algo="sac"), settings).validate()
    except ConfigError as exc:
        raise SpecError(f"--set: {exc}") from None
    return _beyond_defaults(settings)


def _tasks(args: argparse.Namespace) -> tuple[list[Task], list[str]]:
    """The tasks to run, and one line for each target left out because DMC is not installed;
    SpecError (one line) for a --target an env does not have."""
    if args.quick:
        quick = "HalfCheetah-v5"
        return [Task(quick, 1000, 20, t) for t in check_targets(args.target, [quick])], []
    known = {t.env_id: t for t in TARGETS}
    chosen = [
        known.get(env, Task(env, 300_000, 200))
        for env in args.env_id or [t.env_id for t in TARGETS]
    ]
    targets = check_targets(args.target, [t.env_id for t in chosen])
    chosen = [
        Task(t.env_id, args.steps or t.steps, args.labels or t.labels, target)
        for t in chosen for target in targets
    ]  # fmt: skip
    release, left, kept = mujoco_release(), [], []
    for task in chosen:
        problem = dmc.dmc_problem(task.env_id, release) if dmc.is_dmc(task.env_id) else None
        if problem is None:
            kept.append(task)
        elif args.env_id:  # asked for by name: say why not, and stop
            print(f"bench_pebble: error: {problem}", file=sys.stderr)
            sys.exit(2)
        else:
            left.append(task.env_id)
    notes = []
    if left:
        notes.append(
            f"left out: {', '.join(left)} (DeepMind Control needs the dmc extra, in a venv of its"
            " own: RLHF_VENV=.venv-dmc scripts/setup.sh dmc,bench; then .venv-dmc/bin/python"
            f" scripts/bench_pebble.py --env-id {' '.join(left)})"
        )
    return kept, notes


def _plot(results: list[Result], tasks: list[Task], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(tasks), figsize=(5 * len(tasks), 3.6), dpi=110, squeeze=False)
    for ax, task in zip(axes.flat, tasks, strict=True):
        edges = np.linspace(0, task.steps, 21)
        for arm, color in zip(ARMS, ("tab:gray", "tab:red", "tab:blue"), strict=True):
            mine = [r for r in results if task.has(r.job) and r.job.arm == arm]
            if not mine:
                continue
            # Mean return of the episodes that end in each twentieth of the run, per seed.
            arr = np.array([_binned(r.curve, edges) for r in mine])
            mean, std = np.nanmean(arr, 0), np.nanstd(arr, 0)
            ax.plot(edges[1:], mean, color=color, label=_arm_label(arm, task.labels))
            ax.fill_between(edges[1:], mean - std, mean + std, color=color, alpha=0.2)
        seeds = len({r.job.seed for r in results if task.has(r.job)})
        ax.set(
            title=f"{task.name} ({seeds} seed{'s' if seeds != 1 else ''})",
            xlabel="environment steps",
        )
        ax.set(ylabel="true return")
        ax.grid(alpha=0.3)
        ax.legend(loc="upper left", fontsize=8)
    fig.suptitle("mean ± std over seeds")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)


def _arm_label(arm: str, labels: int) -> str:
    return {"sac": "SAC, true reward", "pebble": f"PEBBLE, {labels} labels"}.get(
        arm, f"PPO-RLHF, {labels} labels"
    )


def _binned(curve: list[tuple[int, float]], edges: np.ndarray) -> list[float]:
    xs = np.array([step for step, _ in curve])
    ys = np.array([value for _, value in curve])
    inside = [(xs > lo) & (xs <= hi) for lo, hi in itertools.pairwise(edges)]
    return [float(ys[m].mean()) if m.any() else np.nan for m in inside]


def _table(tasks: list[Task], results: list[Result]) -> dict[str, float]:
    """Print one row per (task, arm); return the headline figures."""
    print("| task | arm | per seed | mean +- std | / SAC true reward | target | steps/s | CPU |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    head: dict[str, float] = {}
    for task in tasks:
        means: dict[str, float] = {}
        for arm in task.arms:
            mine = sorted(
                (r for r in results if task.has(r.job) and r.job.arm == arm),
                key=lambda r: r.job.seed,
            )
            if not mine:
                continue
            rets = [r.final_return for r in mine]
            means[arm] = statistics.fmean(rets)
            std = statistics.pstdev(rets)
            sps = statistics.median(r.sps for r in mine)
            sac = means.get("sac")
            ratio = means[arm] / sac if sac else float("nan")
            shown_ratio = f"{ratio:.2f}" if sac else "-"  # no SAC run to divide by
            verdict = ""
            if arm == "pebble":
                verdict = "no SAC run" if not sac else "met" if ratio >= PASS_RATIO else "not met"
            elif arm == "ppo" and "pebble" in means:
                verdict = "pebble above" if means["pebble"] > means[arm] else "pebble below"
            seeds = ", ".join(f"{v:.0f}" for v in rets)
            name = f"{task.name}, {task.steps // 1000}k, {task.labels} labels"
            shown = " ".join(f"{key_name(k)}={v}" for k, v in mine[0].job.settings)
            cpus = "; ".join(dict.fromkeys(r.cpu or "not recorded" for r in mine))
            print(f"| {name} | {arm}{f' ({shown})' if shown else ''} | {seeds} | {means[arm]:.0f} +- {std:.0f} | {shown_ratio} |"
                  f" {verdict} | {sps:.0f} | {cpus} |")  # fmt: skip
        short = task.env_id.split("/")[-1].split("-v")[0].replace("-", "_").lower()
        short += f"_{task.target}" if task.target else ""
        if means.get("sac") and "pebble" in means:
            head[f"ratio_pebble_over_sac_{short}"] = means["pebble"] / means["sac"]
        if "ppo" in means and "pebble" in means:
            head[f"pebble_minus_ppo_{short}"] = means["pebble"] - means["ppo"]
    return head


def _grid(tasks: list[Task], args: argparse.Namespace, out: Path) -> list[Job]:
    """Every job of the grid, whichever arms this invocation runs (the table shows them all)."""
    return [
        Job(task.env_id, arm, seed, task.steps, 0 if arm == "sac" else task.labels,
            args.mistake, args.quick, str(out), args.hidden_dtype,
            args.settings if arm == "pebble" else task_settings(args.settings), task.target)
        for task in tasks
        for seed in args.seed_list
        for arm in task.arms
    ]  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--env-id", nargs="+", default=None, help="these tasks (default: every target here)"
    )
    parser.add_argument(
        "--steps", type=int, default=None, help="every task's env steps (default: the task's)"
    )
    parser.add_argument(
        "--labels", type=int, default=None, help="every task's labels (default: the task's)"
    )
    parser.add_argument("--mistake", type=float, default=0.0, help="teacher's mistake rate")
    parser.add_argument(
        "--target",
        nargs="+",
        default=None,
        metavar="NAME",
        help="target behaviours (rlhf train --teacher.target) as the true reward of every arm,"
        " each a task of its own on each --env-id (none: the env's own reward)",
    )
    add_seed_flags(
        parser,
        "tune",
        "tune: 1, 2, ... (the seeds the off-policy targets were measured on; default); report:"
        " 101, 102, ..., the few-labels issue's held-out seeds (scripts/bench_rlhf.py's)",
    )
    parser.add_argument("--jobs", type=int, default=2, help="runs at a time")
    parser.add_argument(
        "--arms",
        nargs="+",
        choices=ARMS,
        default=list(ARMS),
        help="run only these arms (the table still shows every arm's results kept in --out)",
    )
    parser.add_argument(
        "--hidden-dtype",
        choices=["auto", "float32", "bfloat16"],
        default="auto",
        help="SAC's hidden layers (auto: as rlhf train picks on this machine)",
    )
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="the pebble arm with this rlhf train setting changed (a variant, kept under its own"
        " key; the other arms' runs serve it), e.g. --set sac.recent-share=0.5; --set"
        " env-kwargs=JSON changes the task: every arm runs with it",
    )
    parser.add_argument("--out", type=Path, default=None, help="results directory (kept)")
    parser.add_argument("--plot", type=Path, default=None, help="learning curves (PNG)")
    parser.add_argument("--quick", action="store_true", help="HalfCheetah, 1k steps, 1 seed")
    args = parser.parse_args()
    try:
        args.seed_list, args.seeds_from = choose_seeds(args)
    except SpecError as exc:
        parser.error(str(exc))
    try:
        args.settings = _variant(args.set)
        tasks, notes = _tasks(args)
    except SpecError as exc:
        parser.error(str(exc))
    if args.hidden_dtype == "auto":  # resolved here, so each result's key names the dtype used
        precision = choose("cpu")
        args.hidden_dtype = precision.dtype
        print(f"SAC hidden layers: {precision.dtype} ({precision.why})")
    for note in notes:
        print(note)
    with tempfile.TemporaryDirectory() as tmp:
        out = args.out or Path(tmp)
        out.mkdir(parents=True, exist_ok=True)
        grid = _grid(tasks, args, out)
        jobs = [job for job in grid if job.arm in args.arms]
        done = _load(out)
        todo = [job for job in jobs if job.key not in done]
        print(f"{len(jobs) - len(todo)} of {len(jobs)} runs already in {out}", flush=True)
        ran = (
            run_jobs(_train, todo, num_cpus=args.jobs, describe=lambda r: r.job.key) if todo else []
        )
        # read again: another driver sharing --out may have finished runs of this grid meanwhile
        done = {**_load(out), **{r.job.key: r for r in ran}}
        results = [done[job.key] for job in grid if job.key in done]
    if args.plot:
        _plot(results, tasks, args.plot)
        print(f"plot: {args.plot}")
    seeds = ", ".join(map(str, args.seed_list))
    where = "--seeds" if args.seeds_from == "given" else f"--seed-set {args.seeds_from}"
    print(f"seeds {seeds} ({where}); final true return (last 10% of steps)")
    head = _table(tasks, results)
    print(" ".join(f"{k}={v:.2f}" for k, v in head.items()))


if __name__ == "__main__":
    main()
