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
import json
import shutil
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, Literal

import numpy as np
from _bench_grid import (
    add_seed_flags,
    check_targets,
    choose_seeds,
    settings_from_json,
    task_settings,
    with_settings,
)
from _bench_rlhf_table import Task, Teacher, headline, make_rows, plot, print_table

from rlhf.config import Config, ConfigError, PPOConfig, QueryConfig, TeacherConfig, flag
from rlhf.config.presets import learned_end, with_preset
from rlhf.core.shell import program, short_path
from rlhf.sweep import run_jobs
from rlhf.sweep.grid import cell_name
from rlhf.sweep.spec import SpecError, key_name, settings_from_flags
from rlhf.sweep.worker import read_scalars

ROOT = Path(__file__).resolve().parent.parent
MODES = ("ppo", "rlhf")
RUNS = "runs"
"""With --keep-runs, the folder of --out that keeps every run's directory."""
KIND_MODES = {"pairs": "rlhf", "ratings": "ratings", "both": "both"}
"""--feedback-kind -> the mode of its runs ("rlhf": pairs, the name results on disk already use)."""
LEARNED = {"rlhf": "pairs", "ratings": "ratings", "both": "both"}
"""Learned-reward mode -> the run's --feedback-kind."""
TEACHER = {
    "teacher.beta": "--beta",
    "teacher.gamma": "--myopia",
    "teacher.mistake": "--mistake",
    "teacher.skip_threshold": "--skip-threshold",
    "teacher.equal_threshold": "--equal-threshold",
}
"""The teacher's noise settings (rlhf train's --teacher.*) -> the benchmark's flag for each
(--myopia: rlhf train's --gamma is PPO's discount, as --set gamma= is here)."""
SEED_NOTES = {
    "given": "--seeds",
    "tune": "--seed-set tune: the seeds presets were chosen on",
    "report": "--seed-set report: held out, never used to tune",
}


@dataclass(frozen=True)
class Job:
    env_id: str
    mode: str
    seed: int
    steps: int
    labels: int
    """RLHF's label budget (--query.total-labels); PPO's jobs have none (0)."""
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
    teacher: tuple[tuple[str, Any], ...] = ()
    """RLHF's teacher settings that differ from the perfect oracle's, as (config path, value)."""
    target: str | None = None
    """--target: the target behaviour both modes are measured on (--teacher.target); None: the
    env's own reward."""

    @property
    def key(self) -> str:
        """The result's file name: settings that differ from the general defaults (or, for the
        end value, from what results saved before it ran with) are in it, so a cached result is
        reused only for the same settings. PPO's has no teacher (not even the label budget,
        which results saved before had): one PPO run serves every teacher."""
        key = f"{self.env_id}__{self.mode}__{self.seed}__{self.steps}"
        key += "" if self.mode == "ppo" else f"__{self.labels}"
        key += f"__{cell_name((('target', self.target),))}" if self.target else ""
        key += f"__logstd{self.init_log_std:g}" if self.init_log_std else ""
        key += f"__end{self.end_value}" if self.end_value != "absorbing" else ""
        key += f"__margin{self.end_margin:g}" if self.end_margin else ""
        key += f"__replay{self.replay_share:g}" if self.replay_share else ""
        # The teacher first: a result of --set teacher.mistake=0.1 (before --mistake) keeps its key.
        own = self.teacher + self.settings
        return key + (f"__{cell_name(own)}" if own else "")

    @property
    def run_settings(self) -> tuple[tuple[str, Any], ...]:
        """What the run sets beyond the benchmark's own: the target, the teacher, --set."""
        target = (("teacher.target", self.target),) if self.target else ()
        return target + self.teacher + self.settings


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
    "teacher.target": "--target",
    **TEACHER,
}
"""Settings with a benchmark flag of their own (--set refuses them and names it)."""
FIXED = (
    "reward",
    "feedback",
    "reward_model_file",
    "labels_from",
    "resume",
    "progress",
    "device",
    "teacher.reward",  # a reward of one's own: for both modes, as --target's, or neither
)
"""Settings the benchmark needs as they are (what it compares, and how its runs run)."""


def _checked(settings: tuple[tuple[str, Any], ...], what: str, env_id: str | None = None) -> None:
    """SpecError (one line, starting with ``what``) when ``settings`` are out of range (refused
    here, not by every RLHF run after PPO's)."""
    try:
        with_settings(Config(env_id=env_id or Config().env_id), settings).validate()
    except ConfigError as exc:
        message = str(exc)
        for path in ("query.total_labels", "teacher.target", *TEACHER):  # named as here
            message = message.replace(flag(path), OWN[path])
        raise SpecError(f"{what}: {message}") from None


def _set_flags(items: list[str]) -> tuple[tuple[str, Any], ...]:
    """--set KEY=VALUE flags as checked settings; SpecError (one line) for a bad or owned key."""
    settings = settings_from_flags(items, "--set")
    for path, _ in settings:
        if path in OWN:
            raise SpecError(f"--set {key_name(path)}: the benchmark sets it; use its {OWN[path]}")
        if path in FIXED:
            raise SpecError(f"--set {key_name(path)}: the benchmark sets it to compare its runs")
    _checked(settings, "--set")  # out of range (--set gamma=2)
    return settings


def _teachers(labels: list[int], noise: dict[str, list[float] | None]) -> list[Teacher]:
    """Every combination of the label budgets and the values of each teacher flag (``noise``:
    teacher setting -> the values given, None: the perfect oracle's); SpecError (one line)
    for a value out of range."""
    oracle = TeacherConfig()
    axes = []
    for path, values in noise.items():
        default = getattr(oracle, path.split(".")[1])
        for value in values or []:
            _checked(((path, value),), f"{TEACHER[path]} {value:g}")
        axes.append([(path, v) for v in dict.fromkeys(values or [default])])
    for n in labels:
        _checked((("query.total_labels", n),), f"--labels {n}")
    teachers = []
    for n, *settings in itertools.product(dict.fromkeys(labels), *axes):
        mine = tuple((p, v) for p, v in settings if v != getattr(oracle, p.split(".")[1]))
        teachers.append(Teacher(n, mine))
    return teachers


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
    (rlhf.config.presets.with_preset decides, as in a run). A margin given to a job without a
    learned end (PPO on the true reward, a fixed horizon) moves nothing there, so it is 0 in
    the job and its key: the true-reward baseline of a margin screen is the one already run."""
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
        "end_margin": (resolved.ppo.end_margin or 0.0) if learned_end(resolved) else 0.0,
    }


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


def _job(args: tuple[Job, Path, bool]) -> Result:
    job, out, keep = args
    result = _train(job, out / RUNS if keep else None)
    # Saved by the run itself, so an interrupted grid keeps every finished run.
    tmp = out / f".{job.key}.tmp"
    tmp.write_text(json.dumps(asdict(result)))
    tmp.replace(out / f"{job.key}.json")
    return result


def _train(job: Job, keep: Path | None = None) -> Result:
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
    tail = [ret for step, ret in curve if step > 0.9 * job.steps]
    final = float(np.mean(tail)) if tail else summary.final_true_return or float("nan")
    steps = [n for step, n in lengths if step > 0.9 * job.steps]
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


def _load(out: Path) -> dict[str, Result]:
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


def _teacher_flags(parser: argparse.ArgumentParser) -> None:
    """The teacher flags: each takes a list, and every combination is a teacher."""
    teacher = parser.add_argument_group(
        "teacher (each flag takes a list; every combination is a teacher, a row of the table)"
    )
    teacher.add_argument(
        "--labels",
        type=int,
        nargs="+",
        default=None,
        help="label budgets (default 700; --quick 100)",
    )
    helps = {
        "teacher.beta": "rationality: P(better) = sigmoid(beta * return gap); inf: always the"
        " better one (default)",
        "teacher.gamma": "myopia: step t of H weighs gamma**(H-1-t) (rlhf train --teacher.gamma;"
        " default 1)",
        "teacher.mistake": "probability of flipping an answer, e.g. 0.1 (default 0)",
        "teacher.skip_threshold": "skip a pair when both returns are low (default 0: never)",
        "teacher.equal_threshold": "answer 'equal' when the returns are this close (default 0)",
    }
    for path, option in TEACHER.items():
        teacher.add_argument(option, type=float, nargs="+", default=None, help=helps[path])
    teacher.add_argument(
        "--target",
        nargs="+",
        default=None,
        metavar="NAME",
        help="target behaviours (rlhf train --teacher.target), each a task of its own, measured"
        " for both PPO and RLHF on its reward; 'none': the env's own reward (default)",
    )


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--steps", type=int, default=300_000, help="env steps per run")
    add_seed_flags(
        parser,
        "report",
        "report: 101, 102, ... (never used to tune; default); tune: 1-12, the seeds presets were"
        " chosen on",
    )
    _teacher_flags(parser)
    parser.add_argument(
        "--env-id",
        nargs="+",
        default=None,
        help="one or more envs (default: HalfCheetah-v5; --quick: Hopper-v5)",
    )
    parser.add_argument("--jobs", type=int, default=2, help="runs in parallel (one core each)")
    parser.add_argument("--out", type=Path, default=None, help="results directory")
    parser.add_argument(
        "--baseline-from",
        type=Path,
        nargs="+",
        default=[],
        metavar="DIR",
        help="also take PPO's results from these directories (other grids' --out), so a grid"
        " that screens a setting runs only its RLHF runs beside the PPO runs of the grid it is"
        " compared with (a run repeats to the last digit on one machine, not across machines)",
    )
    parser.add_argument(
        "--arms",
        nargs="+",
        choices=ARMS,
        default=list(ARMS),
        help="run only these arms (rlhf: every learned one): a screen's RLHF runs before its"
        " baseline, or on another machine; the table still shows every result kept in --out"
        " and --baseline-from, and a ratio where PPO's is there",
    )
    parser.add_argument(
        "--plot",
        type=Path,
        default=None,
        help="learning-curve grid (PNG; default: docs/images/ for 700 perfect labels, pairs and"
        " no target, else curves.png in --out; --quick: none)",
    )
    parser.add_argument(
        "--quick", action="store_true", help="20k steps, 1 seed, 100 labels, Hopper-v5"
    )
    parser.add_argument(
        "--keep-runs",
        action="store_true",
        help=f"keep each run's directory (TensorBoard curves, labels, checkpoints) in"
        f" OUT/{RUNS}/, named by its result's key (default: removed once its result is saved)",
    )
    parser.add_argument(
        "--feedback-kind",
        nargs="+",
        choices=list(KIND_MODES),
        default=["pairs"],
        help="RLHF rows: pairs, and/or ratings (the same number of graded clips), and/or both",
    )
    _run_flags(parser)
    return parser


def _run_flags(parser: argparse.ArgumentParser) -> None:
    """The flags of the runs' other settings."""
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
        " runs stay as they are, except --set env-kwargs=JSON, which changes the task for both",
    )


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
        **_settings(job.env_id, job.mode, *flags, fixed + teacher.settings + extra),
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
        _teachers(args.labels or [100 if args.quick else 700], noise),
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


ARMS = ("ppo", "rlhf")
"""--arms: PPO on the true reward, and every learned mode."""


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
    done = _load(out)
    for where in baselines:
        ppo = {key: r for key, r in _load(where).items() if r.job.mode == "ppo"}
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
            _job,
            [(job, out, keep) for job in todo],
            parallel,
            describe=lambda r: f"{_described(r.job)}: {r.final_return:.0f}",
        ):
            done[result.job.key] = result
    return done


def main() -> None:
    parser = _parser()
    args = parser.parse_args()
    try:
        extra = _set_flags(args.set)
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
