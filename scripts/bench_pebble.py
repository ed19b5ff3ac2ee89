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
    .venv/bin/python scripts/bench_pebble.py --env-id Hopper-v5 --target stand --steps 120000 \
        --labels 300 --mistake 0.1 --seed-set report --arms pebble --set max-minutes=30
                                # at most 30 minutes of training (final: the last tenth of the
                                # steps reached; the labels are spread over the steps that the
                                # minutes hold at the run's pace)
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
import sys
import tempfile
from pathlib import Path
from typing import Any

from _bench_grid import add_seed_flags, check_targets, choose_seeds, task_settings, with_settings
from _bench_pebble_jobs import ARMS, Job, Task, beyond_defaults, load, train
from _bench_pebble_table import plot, table

from rlhf.agent.precision import choose
from rlhf.config import Config, ConfigError
from rlhf.envs import dmc
from rlhf.envs.goals import mujoco_release
from rlhf.sweep import run_jobs
from rlhf.sweep.spec import SpecError, key_name, settings_from_flags

TARGETS = (
    Task("HalfCheetah-v5", 300_000, 200),
    Task("Walker2d-v5", 300_000, 200),
    Task("dm_control/walker-walk-v0", 500_000, 100),
    Task("dm_control/cheetah-run-v0", 500_000, 250),
)
"""The off-policy issue's targets."""

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
    return beyond_defaults(settings)


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


def _kept(args: argparse.Namespace) -> str:
    """What a stopped grid leaves, for the line it ends with."""
    if args.out is None:
        return "nothing is kept without --out"
    return (
        f"finished runs are in {args.out} and stopped ones wrote a checkpoint there:"
        " the same command goes on"
    )


def _parser() -> argparse.ArgumentParser:
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
    return parser


def main() -> None:
    parser = _parser()
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
        done = load(out)
        todo = [job for job in jobs if job.key not in done]
        print(f"{len(jobs) - len(todo)} of {len(jobs)} runs already in {out}", flush=True)
        ran = (
            run_jobs(
                train,
                todo,
                num_cpus=args.jobs,
                describe=lambda r: r.job.key,
                after_stop=_kept(args),
            )
            if todo
            else []
        )
        # read again: another driver sharing --out may have finished runs of this grid meanwhile
        done = {**load(out), **{r.job.key: r for r in ran}}
        results = [done[job.key] for job in grid if job.key in done]
    if args.plot:
        plot(results, tasks, args.plot)
        print(f"plot: {args.plot}")
    seeds = ", ".join(map(str, args.seed_list))
    where = "--seeds" if args.seeds_from == "given" else f"--seed-set {args.seeds_from}"
    print(f"seeds {seeds} ({where}); final true return (last 10% of steps)")
    head = table(tasks, results)
    print(" ".join(f"{k}={v:.2f}" for k, v in head.items()))


if __name__ == "__main__":
    main()
