"""Benchmarks cannot rot: every ``scripts/bench_*.py`` (found by glob, so a new one is covered)
runs with ``--quick`` and ends its stdout with its headline figures as ``key=value`` pairs, one
of them a ratio (``ratio_...``), every number finite (docs: DESIGN.md, "Benchmarks").

Each runs in a subprocess from a fresh temporary directory that is also its ``TMPDIR``, so what
a bench writes (bench_rlhf's results cache, Ray's session files, runs) lands there and goes
with it. A bench whose optional packages are missing here is skipped with the reason.
"""

from __future__ import annotations

import contextlib
import math
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support.workers import RAY

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"
BENCHES = sorted(SCRIPTS.glob("bench_*.py"))
TIMEOUT_S = 240
"""Per bench; each --quick run takes well under a minute on a busy 2-core machine."""


def _modules(*names: str) -> Callable[[], None]:
    def check() -> None:
        for name in names:
            pytest.importorskip(name, reason=f"needs {name} (pip install -e '.[bench]')")

    return check


def _browser() -> None:
    from rlhf.core.chromium import CHROMIUM

    pytest.importorskip("playwright", reason="needs playwright (pip install -e '.[test]')")
    if not CHROMIUM.exists():
        pytest.skip(f"needs Debian's chromium at {CHROMIUM} (apt install chromium)")


def _goal_envs() -> None:
    pytest.importorskip("gymnasium_robotics", reason="needs the goals extra (gymnasium-robotics)")
    from rlhf.envs.goals import goal_env_problem

    problem = goal_env_problem("PointMaze_UMaze-v3")  # --quick's env
    if problem:
        pytest.skip(problem)


NEEDS: dict[str, Callable[[], None]] = {
    "bench_her": _goal_envs,
    "bench_pebble": _modules("ray"),
    "bench_ppo": _modules("stable_baselines3", "ray"),
    "bench_rlhf": _modules("ray"),
    "bench_sac": _modules("stable_baselines3"),
    "bench_sweep": _modules("ray"),
    "bench_web": _browser,
}
"""Bench -> a check that skips it when an optional package it needs is missing here."""
ELSEWHERE = {"bench_rlhf": "tests/bench/test_bench_rlhf.py::test_quick_run_of_a_noisy_teacher"}
"""Benches whose --quick run a test of their own makes, with these checks and more (each --quick
run is a minute of the suite)."""
ON_RAY = {"bench_pebble", "bench_ppo", "bench_rlhf", "bench_sweep"}
"""Benches that start a local Ray: one test worker runs them (``tests/support/workers.py``)."""


def parse_figures(line: str) -> dict[str, str]:
    """A bench's last line, ``key=value`` pairs separated by spaces, as a dict; AssertionError
    on anything else."""
    figures: dict[str, str] = {}
    for pair in line.split():
        key, sep, value = pair.partition("=")
        assert sep and key and value, f"not key=value: {pair!r} in {line!r}"
        assert key not in figures, f"{key} twice in {line!r}"
        figures[key] = value
    assert figures, "the last line is empty"
    return figures


def _number(value: str) -> float | None:
    try:
        return float(value)  # "nan" and "inf" look numeric too: they are caught below
    except ValueError:
        return None


def test_parse_figures() -> None:
    assert parse_figures("ratio_sps=1.62 ours_sps=1510 load=rlhf_train") == {
        "ratio_sps": "1.62",
        "ours_sps": "1510",
        "load": "rlhf_train",
    }
    for bad in ("", "a table row", "ratio=1 ratio=2", "a= b=1"):
        with pytest.raises(AssertionError):
            parse_figures(bad)


def test_a_bench_checked_elsewhere_is_checked_there() -> None:
    root = SCRIPTS.parent
    for stem, where in ELSEWHERE.items():
        path, _, name = where.partition("::")
        source = (root / path).read_text()
        body = source.split(f"def {name}(", 1)[1].split("\ndef ", 1)[0]  # IndexError: not there
        assert "run_quick(" in body and "check_headline(" in body, where
        assert (SCRIPTS / f"{stem}.py").is_file(), stem


def run_quick(script: Path, tmp: Path, *flags: str) -> list[str]:
    """``script --quick FLAGS`` in a subprocess from ``tmp`` (also its ``TMPDIR``): its stdout's
    lines; pytest.fail when it runs past TIMEOUT_S or exits other than 0."""
    env = os.environ | {"TMPDIR": str(tmp), "PYTHONUNBUFFERED": "1"}
    env.setdefault("MUJOCO_GL", "egl")
    # Its own process group: a timeout ends the bench and what it started (Ray, a PPO load).
    proc = subprocess.Popen(
        [sys.executable, str(script), "--quick", *flags],
        cwd=tmp,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        stdout, stderr = proc.communicate(timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        stdout, stderr = proc.communicate()
        pytest.fail(
            f"{script.name} --quick ran past {TIMEOUT_S} s\n{stdout[-3000:]}{stderr[-3000:]}"
        )
    assert proc.returncode == 0, (
        f"{script.name} --quick exited {proc.returncode}:\n{stderr[-3000:]}"
    )
    lines = stdout.rstrip("\n").splitlines()
    assert lines, f"{script.name} --quick printed nothing"
    return lines


@pytest.mark.slow
@pytest.mark.timeout(TIMEOUT_S + 30)
@pytest.mark.parametrize(
    "script",
    [
        pytest.param(p, marks=[RAY] if p.stem in ON_RAY else [], id=p.stem)
        for p in BENCHES
        if p.stem not in ELSEWHERE
    ],
)
def test_quick_run_ends_with_its_headline_figures(script: Path, short_tmp: Path) -> None:
    NEEDS.get(script.stem, lambda: None)()
    check_headline(script, run_quick(script, short_tmp))


def check_headline(script: Path, lines: list[str]) -> dict[str, str]:
    """The last line's figures (see :func:`parse_figures`): at least one ``ratio_`` among them,
    every number finite."""
    figures = parse_figures(lines[-1])
    ratios = [key for key in figures if key.startswith("ratio_")]
    assert ratios, f"no ratio_ key in {script.name}'s last line: {lines[-1]!r}"
    numbers = {key: _number(value) for key, value in figures.items()}
    bad = {
        key: figures[key] for key, x in numbers.items() if x is not None and not math.isfinite(x)
    }
    assert not bad, f"{script.name}: figures not finite: {bad} in {lines[-1]!r}"
    return figures
