"""Benchmark: what Ray costs a sweep cell, next to the same run started alone, in one invocation.

Each repeat runs the same cell (HalfCheetah-v5 on the env reward, one torch thread) twice, one
after the other so both see the same machine load: alone, as ``rlhf train`` in a fresh process,
and as a Ray task of ``rlhf sweep`` (rlhf.sweep.worker.run_cell on a local Ray with one CPU).
Overhead is a run's wall time from start to result minus its training time (summary.json's
wall_seconds): Python start, imports, making the env, writing the summary, and for Ray the task's
dispatch and reading the cell's TensorBoard curve. The first Ray cell starts a worker process
(cold); later cells reuse it (warm), as the cells of a sweep do.

    .venv/bin/python scripts/bench_sweep.py             # 50k steps, 3 repeats
    .venv/bin/python scripts/bench_sweep.py --quick     # under a minute, smoke check

Needs Ray: scripts/setup.sh bench
"""

from __future__ import annotations

import argparse
import functools
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from rlhf.config import Config
from rlhf.sweep.grid import Cell
from rlhf.sweep.pool import RayOptions, map_jobs, ray_session
from rlhf.sweep.worker import run_cell

ENV_ID = "HalfCheetah-v5"


def alone(runs: Path, name: str, steps: int, seed: int) -> tuple[float, float]:
    """(overhead seconds, steps/s) of ``rlhf train`` in a fresh process."""
    start = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "rlhf", "train", "--env-id", ENV_ID, "--reward", "env",
         "--total-timesteps", str(steps), "--seed", str(seed), "--runs-dir", str(runs),
         "--run-name", name, "--no-progress"],
        check=True, capture_output=True,
    )  # fmt: skip
    wall = time.perf_counter() - start
    summary = json.loads((runs / name / "summary.json").read_text())
    return wall - summary["wall_seconds"], summary["sps"]


def under_ray(runs: Path, name: str, steps: int, seed: int) -> tuple[float, float]:
    """(overhead seconds, steps/s) of the same run as one sweep cell on the running Ray."""
    config = Config(
        env_id=ENV_ID, reward="env", total_timesteps=steps, seed=seed, runs_dir=str(runs),
        run_name=name, progress=False,
    )  # fmt: skip
    start = time.perf_counter()
    cell = Cell(name, (("seed", seed),), config)
    [outcome] = map_jobs(functools.partial(run_cell), [cell], describe=lambda r: r.name)
    wall = time.perf_counter() - start
    result = outcome.value
    if result is None or not result.ok:
        raise SystemExit(f"the Ray cell failed: {outcome.error or result}")
    return wall - result.wall_seconds, result.sps  # type: ignore[operator,return-value]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--steps", type=int, default=50_000, help="env steps per run")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="4k steps, 2 repeats")
    args = parser.parse_args()
    steps, repeats = (4_096, 2) if args.quick else (args.steps, args.repeats)
    rows: list[tuple[str, int, float, float]] = []
    with tempfile.TemporaryDirectory() as tmp:
        runs = Path(tmp)
        start = time.perf_counter()
        say = functools.partial(print, file=sys.stderr)
        with ray_session(RayOptions(num_cpus=1, dashboard=False), say):
            ray_init = time.perf_counter() - start
            for i in range(repeats):
                rows.append(("alone", i, *alone(runs, f"alone{i}", steps, i + 1)))
                kind = "ray cold" if i == 0 else "ray warm"
                rows.append((kind, i, *under_ray(runs, f"ray{i}", steps, i + 1)))
    print(f"{'run':9} {'repeat':>6} {'overhead s':>10} {'steps/s':>8}")
    for kind, i, overhead, sps in rows:
        print(f"{kind:9} {i:>6} {overhead:>10.2f} {sps:>8.0f}")

    def median(kinds: tuple[str, ...], column: int) -> float:
        values = [row[column] for row in rows if row[0] in kinds]
        return statistics.median(values) if values else float("nan")

    alone_sps, ray_sps = median(("alone",), 3), median(("ray cold", "ray warm"), 3)
    alone_over = median(("alone",), 2)
    cold, warm = median(("ray cold",), 2), median(("ray warm",), 2)
    print(
        f"\nRay start-up {ray_init:.1f} s once per sweep; per-cell overhead (median):"
        f" alone {alone_over:.2f} s, Ray cold worker {cold:.2f} s, warm worker {warm:.2f} s"
    )
    print(
        f"median steps/s: Ray {ray_sps:.0f}, alone {alone_sps:.0f}, ratio {ray_sps / alone_sps:.2f}"
    )
    print(
        f"ratio_sps={ray_sps / alone_sps:.2f} ray_sps={ray_sps:.0f} alone_sps={alone_sps:.0f}"
        f" ray_init_s={ray_init:.1f} alone_overhead_s={alone_over:.2f}"
        f" ray_cold_overhead_s={cold:.2f} ray_warm_overhead_s={warm:.2f}"
        f" steps={steps} repeats={repeats}"
    )


if __name__ == "__main__":
    main()
