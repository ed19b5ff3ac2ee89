"""Benchmark: RLHF from a simulated teacher vs PPO on the same reward, per task and teacher.

For each task (an env, or with ``--target`` a target behaviour on it), teacher and seed, trains
RLHF (``--feedback synthetic``: the learned reward only, never the env's; terminations handled as
``rlhf train`` does by default) beside PPO on the task's true reward with the standard env (the
upper baseline; one PPO run per task and seed serves every teacher). A *teacher* is one
combination of the teacher flags, each taking a list: ``--labels`` (the budget), ``--mistake``,
``--beta``, ``--myopia``, ``--skip-threshold``, ``--equal-threshold`` (B-Pref's noise; rlhf
train's ``--teacher.*``); default: 700 labels from the perfect oracle. Seeds: the first
``--n-seeds`` (3) of ``--seed-set report`` (101, 102, ...: never used to tune anything; ``tune``:
1-12, the seeds presets were chosen on), or ``--seeds``.

Runs are Ray tasks (one CPU and one torch thread each, ``--jobs`` at a time; see rlhf.sweep).
Each finished run saves its result in ``--out`` (a directory, one JSON file per run), and an
invocation skips the runs already there, so a long grid can be stopped and continued. Prints one
row per (task, teacher): final return of PPO and of RLHF, mean +- std over seeds, the ratio of the
means and the lowest seed's ratio, the labels RLHF used and its wall time; writes a grid of
learning curves (one panel per task, one curve per teacher), and prints the headline figures as
the last line.

"Final" return: the mean true return of the episodes that end in the last 10% of the run's steps
(the standard env's return, or the target's, whatever the run trains on). On a robot whose
episodes end when it falls the return also grows with how long it stays up, so the table gives
each arm's return per step of those episodes beside it (``per step``: what it earns while up).

    .venv/bin/python scripts/bench_rlhf.py                                   # HalfCheetah, 300k
    .venv/bin/python scripts/bench_rlhf.py --steps 1000000 --env-id HalfCheetah-v5 Hopper-v5 \\
        Walker2d-v5 Ant-v5 Swimmer-v5
    .venv/bin/python scripts/bench_rlhf.py --quick                           # smoke check, Hopper
    .venv/bin/python scripts/bench_rlhf.py --labels 200 700 --mistake 0 0.1  # 4 teachers
    .venv/bin/python scripts/bench_rlhf.py --labels 200 --beta 1 --myopia 0.99 --skip-threshold 0.1
    .venv/bin/python scripts/bench_rlhf.py --env-id Hopper-v5 --target none backflip
                                        # + PPO and RLHF on a target behaviour's reward
    .venv/bin/python scripts/bench_rlhf.py --seed-set tune --n-seeds 12      # the tuning seeds
    .venv/bin/python scripts/bench_rlhf.py --feedback-kind pairs ratings     # + 700 ratings
    .venv/bin/python scripts/bench_rlhf.py --env-id Ant-v5 --init-log-std 0 --replay-share 0
                                        # Ant without its preset (rlhf/config/presets.py)
    .venv/bin/python scripts/bench_rlhf.py --end-value absorbing  # as before --end-value zero
    .venv/bin/python scripts/bench_rlhf.py --env-id Hopper-v5 --end-margin 0  # without its preset
    .venv/bin/python scripts/bench_rlhf.py --env-id Walker2d-v5 --set query.segment-length=25
                                        # any other rlhf train setting, for the RLHF runs
    .venv/bin/python scripts/bench_rlhf.py --env-id Ant-v5 \
        --set 'env-kwargs={"include_cfrc_ext_in_observation": false}'   # a task of its own: both
    .venv/bin/python scripts/bench_rlhf.py --out runs/screen --baseline-from runs/bench \
        --set reward-model.weight-decay=0   # RLHF runs only: PPO's from an earlier grid
    .venv/bin/python scripts/bench_rlhf.py --out runs/screen --arms rlhf \
        --set ppo.min-std=0.1               # RLHF runs first; PPO's later (same --out)

Needs the bench extra (matplotlib): scripts/setup.sh bench
"""

from __future__ import annotations

import argparse
import itertools
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from _bench_grid import check_targets, choose_seeds, task_settings
from _bench_rlhf_args import ARMS, make_parser
from _bench_rlhf_jobs import KIND_MODES, TEACHER, Job, make_teachers, preset_settings, set_flags
from _bench_rlhf_runs import RUNS, Result, load, run_job
from _bench_rlhf_table import Task, Teacher, headline, make_rows, plot, print_table

from rlhf.core.shell import program, short_path
from rlhf.sweep import run_jobs
from rlhf.sweep.spec import SpecError

ROOT = Path(__file__).resolve().parent.parent
MODES = ("ppo", "rlhf")
SEED_NOTES = {
    "given": "--seeds",
    "tune": "--seed-set tune: the seeds presets were chosen on",
    "report": "--seed-set report: held out, never used to tune",
}


def _parser() -> argparse.ArgumentParser:
    """The benchmark's command line (_bench_rlhf_args.py), the script's docstring its --help."""
    return make_parser(__doc__)


@dataclass(frozen=True)
class Grid:
    """What one invocation runs: tasks x teachers x seeds, PPO once per task and seed."""

    envs: list[str]
    targets: list[str | None]
    teachers: list[Teacher]
    modes: tuple[str, ...]
    """"ppo" and the learned modes (--feedback-kind)."""
    seeds: list[int]
    seed_set: str
    steps: int

    def jobs(self, args: argparse.Namespace, extra: tuple[tuple[str, Any], ...]) -> list[Job]:
        """Each task's jobs, seed by seed: PPO (no teacher: Teacher(0)), then every learned mode
        with every teacher (with the --set settings ``extra``; PPO with those that change the
        task only)."""
        cells = [("ppo", Teacher(0))] + [(m, t) for m in self.modes[1:] for t in self.teachers]
        return [
            _make_job(
                args,
                Job(env_id, mode, seed, self.steps, teacher.labels),
                teacher,
                target,
                task_settings(extra) if mode == "ppo" else extra,
            )
            for env_id, target, seed in itertools.product(self.envs, self.targets, self.seeds)
            for mode, teacher in cells
        ]


def _make_job(
    args: argparse.Namespace,
    job: Job,
    teacher: Teacher,
    target: str | None,
    extra: tuple[tuple[str, Any], ...],
) -> Job:
    """``job`` with its teacher, target, --set settings and the run flags as rlhf train
    resolves them for it (PPO on the true reward keeps an absorbing end: it has no learned one)."""
    fixed = (("teacher.target", target),) if target else ()
    flags = (args.init_log_std, args.replay_share, args.end_margin)
    return replace(
        job,
        end_value="absorbing" if job.mode == "ppo" else args.end_value,
        settings=extra,
        teacher=teacher.settings,
        target=target,
        **preset_settings(job.env_id, job.mode, *flags, fixed + teacher.settings + extra),
    )


def _grid(args: argparse.Namespace) -> Grid:
    """The invocation's grid from its flags (--quick: Hopper-v5, 20k steps, one seed, 100
    labels, unless given); SpecError (one line) for a value out of range."""
    # --quick runs Hopper: its returns are above zero from the start (a healthy reward per step),
    # so 20k steps give a ratio; HalfCheetah's PPO is still below zero there (no ratio: nan).
    envs = args.env_id or ["Hopper-v5" if args.quick else "HalfCheetah-v5"]
    noise = {path: getattr(args, opt[2:].replace("-", "_")) for path, opt in TEACHER.items()}
    seeds, seed_set = choose_seeds(args)
    return Grid(
        envs,
        check_targets(args.target, envs),
        make_teachers(args.labels or [100 if args.quick else 700], noise),
        ("ppo", *dict.fromkeys(KIND_MODES[k] for k in args.feedback_kind)),
        seeds,
        seed_set,
        20_480 if args.quick else args.steps,
    )


def _plot_path(args: argparse.Namespace, grid: Grid, out: Path) -> Path | None:
    """--plot; else the docs' figure for the benchmark as it always ran (700 perfect labels,
    pairs, the env's reward), curves.png in --out for any other grid, none for --quick."""
    if args.plot or args.quick:
        return args.plot
    if grid.teachers == [Teacher(700)] and grid.modes == MODES and grid.targets == [None]:
        return ROOT / "docs" / "images" / f"rlhf_vs_ppo_{grid.steps // 1000}k.png"
    return out / "curves.png"


def _arm(job: Job) -> str:
    return "ppo" if job.mode == "ppo" else "rlhf"


def _described(job: Job) -> str:
    """``Hopper-v5 [backflip] rlhf 200l_m0.1 seed 101``: a run in the progress lines."""
    task = Task(job.env_id, job.target).text
    teacher = "" if job.mode == "ppo" else f" {Teacher(job.labels, job.teacher).tag}"
    return f"{task} {job.mode}{teacher} seed {job.seed}"


def _run(
    jobs: list[Job],
    out: Path,
    parallel: int,
    keep: bool = False,
    baselines: Sequence[Path] = (),
    arms: Sequence[str] = ARMS,
) -> dict[str, Result]:
    """Every job's result that is there: those already in ``out`` (PPO's also in
    ``baselines``), and the others of ``arms`` run (and saved in ``out``)."""
    done = load(out)
    for where in baselines:
        ppo = {key: r for key, r in load(where).items() if r.job.mode == "ppo"}
        done = ppo | done
    missing = list({job.key: job for job in jobs if job.key not in done}.values())
    todo = [job for job in missing if _arm(job) in arms]
    left = (
        f" ({len(missing) - len(todo)} of the other arm left out: --arms)"
        if missing != todo
        else ""
    )
    print(f"{len(jobs) - len(missing)} runs already in {out}; {len(todo)} to run{left}", flush=True)
    if todo:  # no Ray start-up when every run is already there
        for result in run_jobs(
            run_job,
            [(job, out, keep) for job in todo],
            parallel,
            describe=lambda r: f"{_described(r.job)}: {r.final_return:.0f}",
            after_stop=f"finished runs are in {short_path(out)}: the same command runs the rest",
        ):
            done[result.job.key] = result
    return done


def main() -> None:
    parser = _parser()
    args = parser.parse_args()
    try:
        extra = set_flags(args.set)
        grid = _grid(args)
    except SpecError as exc:
        parser.error(str(exc))
    for where in args.baseline_from:
        if not where.is_dir():
            parser.error(f"--baseline-from {where}: no such directory")
    out = args.out or Path(tempfile.gettempdir()) / f"bench_rlhf_{grid.steps}"
    out.mkdir(parents=True, exist_ok=True)
    print(f"seeds: {' '.join(map(str, grid.seeds))} ({SEED_NOTES[grid.seed_set]})")
    jobs = grid.jobs(args, extra)
    done = _run(jobs, out, args.jobs, args.keep_runs, args.baseline_from, args.arms)
    if args.keep_runs:
        runs = short_path(out / RUNS)
        print(f"every run's directory: {runs} ({program('tensorboard')} --logdir {runs})")
    pairs = [(job, done[job.key]) for job in jobs if job.key in done]  # --arms: some may miss
    rows = make_rows(pairs)
    print_table(rows)
    path = _plot_path(args, grid, out)
    if path is not None:
        plot(pairs, rows, grid.steps, path)
        print(f"plot: {path}")
    print(headline(rows, grid.steps, grid.seeds, grid.seed_set))


if __name__ == "__main__":
    main()
