"""Benchmark: seconds to render + encode one pair video, alone and while PPO trains next to it.

Each pair is two 50-step HalfCheetah-v5 segments (states from random actions), rendered from
state at 256x256 with the default VideoConfig (shadows and reflections off) and written as one
side-by-side H.264 MP4, exactly as the render worker does. It is timed twice in one invocation:
(a) alone, (b) while a CPU load like the trainer's runs beside it: ``python -m rlhf train
--reward env`` in a subprocess, or, if that cannot start, a busy one-thread torch training loop.
Prints a table and, as its last line, the headline figures as key=value pairs.

    .venv/bin/python scripts/bench_render.py             # 10 pairs each way
    .venv/bin/python scripts/bench_render.py --pairs 20
    .venv/bin/python scripts/bench_render.py --quick     # under a minute, smoke check
"""

from __future__ import annotations

import argparse
import contextlib
import os
import resource
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

os.environ.setdefault("MUJOCO_GL", "egl")

import gymnasium as gym
import numpy as np

from rlhf.config import VideoConfig
from rlhf.render.video import SegmentRenderer, write_pair_video

ENV_ID = "HalfCheetah-v5"
TARGET_S = 1.0

_TORCH_LOAD = """
import torch
torch.set_num_threads(1)
net = torch.nn.Sequential(torch.nn.Linear(17, 64), torch.nn.Tanh(), torch.nn.Linear(64, 64),
                          torch.nn.Tanh(), torch.nn.Linear(64, 1))
opt = torch.optim.Adam(net.parameters(), lr=3e-4)
x, y = torch.randn(2048, 17), torch.randn(2048, 1)
print("ready", flush=True)
while True:
    for idx in torch.randperm(2048).split(64):
        loss = ((net(x[idx]) - y[idx]) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
"""


@dataclass(frozen=True)
class Timing:
    render_s: float
    encode_s: float
    cpu_s: float
    """CPU seconds of this process (GL threads included) and its ffmpeg child: less load-bound."""
    file_bytes: int

    @property
    def total_s(self) -> float:
        return self.render_s + self.encode_s


def random_segments(count: int, steps: int, seed: int = 0) -> list[tuple[np.ndarray, np.ndarray]]:
    """``count`` consecutive (qpos, qvel) windows of ``steps`` states from random actions."""
    env = gym.make(ENV_ID)
    env.reset(seed=seed)
    env.action_space.seed(seed)
    data = env.unwrapped.data
    qpos, qvel = [], []
    for _ in range(count * steps):
        qpos.append(data.qpos.copy())
        qvel.append(data.qvel.copy())
        _, _, terminated, truncated, _ = env.step(env.action_space.sample())
        if terminated or truncated:
            env.reset()
    env.close()
    q, v = np.array(qpos), np.array(qvel)
    return [(q[i : i + steps], v[i : i + steps]) for i in range(0, len(q), steps)]


def time_pairs(renderer: SegmentRenderer, segments: list, out_dir: Path) -> list[Timing]:
    """Render and encode consecutive segments two by two; one Timing per pair."""
    timings = []
    for i in range(0, len(segments) - 1, 2):
        cpu_start = _cpu_seconds()
        start = time.perf_counter()
        left = renderer.render(*segments[i])
        right = renderer.render(*segments[i + 1])
        rendered = time.perf_counter()
        path = write_pair_video(left, right, out_dir / f"{i}.mp4", renderer.fps)
        done = time.perf_counter()
        cpu = _cpu_seconds() - cpu_start
        timings.append(Timing(rendered - start, done - rendered, cpu, path.stat().st_size))
    return timings


def _cpu_seconds() -> float:
    children = resource.getrusage(resource.RUSAGE_CHILDREN)  # finished ffmpeg encoders
    return time.process_time() + children.ru_utime + children.ru_stime


def start_load(runs_dir: Path, warmup_s: float) -> tuple[subprocess.Popen, str]:
    """Start the trainer (or the torch loop if it fails to start) in its own process group."""
    trainer = [sys.executable, "-m", "rlhf", "train", "--reward", "env", "--env-id", ENV_ID]
    trainer += ["--total-timesteps", "10000000", "--no-progress", "--runs-dir", str(runs_dir)]
    candidates = [("rlhf train", trainer), ("torch loop", [sys.executable, "-c", _TORCH_LOAD])]
    for name, cmd in candidates:
        proc = subprocess.Popen(
            cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
        )
        time.sleep(warmup_s)  # let it import torch and reach its steady training loop
        if proc.poll() is None:
            return proc, name
        print(f"load {name!r} exited with {proc.returncode}; trying the next one", file=sys.stderr)
    raise RuntimeError("no CPU load could be started")


def stop_load(proc: subprocess.Popen) -> None:
    """End the load and anything it started (it leads its own process group)."""
    with contextlib.suppress(ProcessLookupError):  # already gone
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def median(values: list[float]) -> float:
    return statistics.median(values)


def report(alone: list[Timing], loaded: list[Timing], load_name: str, fps: float) -> None:
    head = f"{'condition':<22}{'pairs':>6}{'render s':>10}{'encode s':>10}{'total s':>10}"
    print(f"{head}{'cpu s':>8}{'KiB':>8}")
    for name, rows in (("alone", alone), (f"under {load_name}", loaded)):
        print(
            f"{name:<22}{len(rows):>6}{median([t.render_s for t in rows]):>10.3f}"
            f"{median([t.encode_s for t in rows]):>10.3f}{median([t.total_s for t in rows]):>10.3f}"
            f"{median([t.cpu_s for t in rows]):>8.3f}"
            f"{median([t.file_bytes for t in rows]) / 1024:>8.1f}"
        )
    a, b = median([t.total_s for t in alone]), median([t.total_s for t in loaded])
    kib = median([t.file_bytes for t in alone + loaded]) / 1024
    cpu = median([t.cpu_s for t in alone])
    print(
        f"render_pair_s={a:.3f} render_pair_loaded_s={b:.3f} ratio_loaded={b / a:.2f} "
        f"target_s={TARGET_S} cpu_pair_s={cpu:.3f} file_kib={kib:.1f} fps={fps:g} load={load_name.replace(' ', '_')}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=10, help="pairs timed in each condition")
    parser.add_argument("--quick", action="store_true", help="3 pairs each, short warm-up")
    parser.add_argument("--steps", type=int, default=50, help="steps per segment")
    args = parser.parse_args()
    pairs = 3 if args.quick else args.pairs
    cfg = VideoConfig()  # 256x256, shadows and reflections off: what the worker renders

    segments = random_segments(2 * pairs + 2, args.steps)
    renderer = SegmentRenderer(ENV_ID, cfg)
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        time_pairs(renderer, segments[-2:], out)  # warm-up: first-use costs are not per pair
        alone = time_pairs(renderer, segments[: 2 * pairs], out)
        proc, load_name = start_load(out / "runs", warmup_s=3.0 if args.quick else 8.0)
        try:
            loaded = time_pairs(renderer, segments[: 2 * pairs], out)
        finally:
            stop_load(proc)
    fps = renderer.fps
    renderer.close()
    report(alone, loaded, load_name, fps)


if __name__ == "__main__":
    main()
