"""The fast-labeller half of bench_web.py: a real labelling session (render pool, server) with a
PPO run beside it, and a headless Chromium answering 0.4 s after each pair starts playing.

The wait of each answer is the time from the key press to the next pair's video firing
``playing``. The pairs are real HalfCheetah segments (random actions, 2 s at real time), queued
unrendered, so the render pool has to keep up with the labeller from the first answer on.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from rlhf.config import VideoConfig, WebConfig
from rlhf.core.chromium import CHROMIUM, CHROMIUM_ARGS
from rlhf.core.types import Pair, Segment
from rlhf.feedback.session import LabellingSession
from rlhf.render.worker import pool_size
from rlhf.store import LabelStore

_PROBE = """
window.__fast = { events: [] };
document.addEventListener("playing", (e) => {
  window.__fast.events.push({ t: performance.now(), id: e.target.dataset.pairId });
}, true);
"""


@dataclass(frozen=True)
class FastResult:
    waits_s: list[float]
    answers: int
    processes: int
    stored: int
    policy_clips: int = 0
    """Policy clips the render pool drew during the session (--policy-clip-s)."""


def cheetah_pairs(n: int, steps: int = 40, seed: int = 0) -> list[Pair]:
    """``n`` pairs of HalfCheetah segments under random actions, with their physics states."""
    import gymnasium as gym

    env = gym.make("HalfCheetah-v5")
    env.reset(seed=seed)
    env.action_space.seed(seed)
    sim = env.unwrapped
    segments = []
    for _ in range(2 * n):
        rows: dict[str, list] = {k: [] for k in ("obs", "actions", "rewards", "qpos", "qvel")}
        obs = sim._get_obs()
        for _ in range(steps):
            action = env.action_space.sample()
            rows["qpos"].append(sim.data.qpos.copy())
            rows["qvel"].append(sim.data.qvel.copy())
            rows["obs"].append(obs)
            rows["actions"].append(action)
            obs, reward, *_ = env.step(action)
            rows["rewards"].append(reward)
        segments.append(
            Segment(
                obs=np.asarray(rows["obs"], np.float32),
                actions=np.asarray(rows["actions"], np.float32),
                true_rewards=np.asarray(rows["rewards"], np.float32),
                qpos=np.asarray(rows["qpos"]),
                qvel=np.asarray(rows["qvel"]),
                env_id="HalfCheetah-v5",
            )
        )
    env.close()
    return [Pair(segments[2 * i], segments[2 * i + 1]) for i in range(n)]


def start_ppo(workdir: Path) -> subprocess.Popen:
    """A PPO run on the env reward beside the session (the trainer's share of the machine)."""
    cmd = [
        sys.executable, "-m", "rlhf", "train", "--reward", "env", "--env-id", "HalfCheetah-v5",
        "--total-timesteps", "50000000", "--no-progress", "--runs-dir", str(workdir / "ppo"),
        "--run-name", "beside",
    ]  # fmt: skip
    return subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def _answer_once(page, every_s: float) -> float:
    """Wait until the current pair has played ``every_s`` seconds, press Left; the wait (s)."""
    current = page.wait_for_function(
        """(every) => { const ev = window.__fast.events; const d =
            document.getElementById('screen').dataset.pairId;
            const mine = ev.filter((e) => e.id === d);
            return d && mine.length && performance.now() - mine[0].t >= every ? d : null; }""",
        arg=every_s * 1000,
        timeout=60000,
    ).json_value()
    pressed = page.evaluate("() => performance.now()")
    page.keyboard.press("ArrowLeft")
    played = page.wait_for_function(
        """([cur, t0]) => { const e = window.__fast.events.find((r) => r.t >= t0 && r.id !== cur);
            return e ? e.t : null; }""",
        arg=[current, pressed],
        timeout=60000,
    ).json_value()
    return (played - pressed) / 1000


def queue_policy_clips(
    store_path: Path, clips: list[Segment], every_s: float, stop: threading.Event
) -> None:
    """What the trainer does with ``--policy-clip-every``: a clip of the policy queued every
    ``every_s`` seconds (the render pool draws it when idle, the page shows it)."""
    store = LabelStore(store_path)
    try:
        for i, clip in enumerate(clips):
            if stop.wait(every_s):
                break
            store.add_policy_clip(clip, iteration=i + 1, env_step=2048 * (i + 1))
    finally:
        store.close()


def bench_fast(
    workdir: Path, answers: int, every_s: float = 0.4, clip_every_s: float = 0.0
) -> FastResult:
    """One session of ``answers`` answers, ``every_s`` after each pair starts playing; with
    ``clip_every_s``, a policy clip is queued that often meanwhile."""
    from playwright.sync_api import sync_playwright

    run = workdir / "fast"
    run.mkdir()
    store = LabelStore(run / "labels.sqlite")
    store.set_meta("env_id", "HalfCheetah-v5")
    store.add_pairs(cheetah_pairs(answers + 5), iteration=1)
    video = VideoConfig()
    ppo = start_ppo(workdir)
    waits: list[float] = []
    stop = threading.Event()
    if clip_every_s > 0:
        clips = [p.left for p in cheetah_pairs(50, seed=1)]
        args = (run / "labels.sqlite", clips, clip_every_s, stop)
        threading.Thread(target=queue_policy_clips, args=args, daemon=True).start()
    try:
        time.sleep(5.0)  # PPO past its start-up, training
        with LabellingSession(run, WebConfig(), video, say=lambda _: None) as session:
            with sync_playwright() as pw:
                browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
                page = browser.new_page(viewport={"width": 1100, "height": 860})
                page.add_init_script(_PROBE)
                page.goto(session.local_url)
                for _ in range(answers):
                    waits.append(_answer_once(page, every_s))
                browser.close()
            deadline = time.monotonic() + 10
            while store.counts().labelled < answers and time.monotonic() < deadline:
                time.sleep(0.05)
            stored = store.counts().labelled
            clips_drawn = len(store.policy_clips())
    finally:
        stop.set()
        ppo.terminate()
        ppo.wait(30)
        store.close()
    return FastResult(waits, answers, pool_size(video), stored, clips_drawn)
