"""The command line of bench_rlhf.py: its argparse parser, with the teacher flags (every
combination a teacher), the grid's flags and the runs' settings. The script's docstring is the
parser's description (its --help text), so it stays in the script.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from _bench_grid import add_seed_flags
from _bench_rlhf_jobs import KIND_MODES, TEACHER
from _bench_rlhf_runs import RUNS

ARMS = ("ppo", "rlhf")
"""--arms: PPO on the true reward, and every learned mode."""


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


def make_parser(description: str) -> argparse.ArgumentParser:
    """The benchmark's parser; ``description``: the script's docstring (its --help text)."""
    parser = argparse.ArgumentParser(
        description=description, formatter_class=argparse.RawDescriptionHelpFormatter
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
