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
    spare: tuple[int, ...] = ()
    """At each press, the pairs ready besides the one on screen (0: the next must be rendered)."""


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


def start_ppo(workdir: Path, name: str = "beside") -> subprocess.Popen:
    """A PPO run on the env reward beside the session (the trainer's share of the machine)."""
    cmd = [
        sys.executable, "-m", "rlhf", "train", "--reward", "env", "--env-id", "HalfCheetah-v5",
        "--total-timesteps", "50000000", "--no-progress", "--runs-dir", str(workdir / "ppo"),
        "--run-name", name, "--seed", "0",
    ]  # fmt: skip
    return subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def _answer_once(page, every_s: float, before_press=lambda: None) -> float:
    """Wait until the current pair has played ``every_s`` seconds, call ``before_press``, press
    Left; the wait (s)."""
    current = page.wait_for_function(
        """(every) => { const ev = window.__fast.events; const d =
            document.getElementById('screen').dataset.pairId;
            const mine = ev.filter((e) => e.id === d);
            return d && mine.length && performance.now() - mine[0].t >= every ? d : null; }""",
        arg=every_s * 1000,
        timeout=60000,
    ).json_value()
    before_press()
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
    workdir: Path,
    answers: int,
    every_s: float = 0.4,
    clip_every_s: float = 0.0,
    video: VideoConfig | None = None,
    name: str = "fast",
) -> FastResult:
    """One session of ``answers`` answers, ``every_s`` after each pair starts playing; with
    ``clip_every_s``, a policy clip is queued that often meanwhile. ``name``: its folder under
    ``workdir`` (one per session)."""
    from playwright.sync_api import sync_playwright

    run = workdir / name
    run.mkdir()
    store = LabelStore(run / "labels.sqlite")
    store.set_meta("env_id", "HalfCheetah-v5")
    store.add_pairs(cheetah_pairs(answers + 5), iteration=1)
    video = video or VideoConfig()
    ppo = start_ppo(workdir, f"beside-{name}")
    waits: list[float] = []
    spare: list[int] = []
    stop = threading.Event()
    if clip_every_s > 0:
        clips = [p.left for p in cheetah_pairs(50, seed=1)]
        args = (run / "labels.sqlite", clips, clip_every_s, stop)
        threading.Thread(target=queue_policy_clips, args=args, daemon=True).start()

    def look() -> None:
        spare.append(store.counts().ready_unlabelled - 1)

    try:
        time.sleep(5.0)  # PPO past its start-up, training
        with LabellingSession(run, WebConfig(), video, say=lambda _: None) as session:
            with sync_playwright() as pw:
                browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
                page = browser.new_page(viewport={"width": 1100, "height": 860})
                page.add_init_script(_PROBE)
                page.goto(session.local_url)
                for _ in range(answers):
                    waits.append(_answer_once(page, every_s, look))
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
    return FastResult(waits, answers, pool_size(video), stored, clips_drawn, tuple(spare))


FIXED = VideoConfig(ready_ahead_max=VideoConfig().ready_ahead)
"""The baseline: a fixed ``--video.ready-ahead`` pairs ahead, whatever the labeller's pace."""
PACED = VideoConfig()
"""Today's default: at least that many, more for a fast labeller or a slow render."""


def compare_ready_ahead(workdir: Path, answers: int, repeats: int) -> dict[str, list[FastResult]]:
    """The fast labeller ``repeats`` times with a fixed render-ahead and with the paced one,
    alternating which goes first (the machine's other work drifts over minutes)."""
    results: dict[str, list[FastResult]] = {"fixed": [], "paced": []}
    for i in range(repeats):
        arms = [("fixed", FIXED), ("paced", PACED)]
        for label, video in arms if i % 2 == 0 else arms[::-1]:
            results[label].append(bench_fast(workdir, answers, video=video, name=f"{label}{i}"))
    return results


WAITED_S = 0.1
"""A press "waited" when the next pair took longer than this to play (one ready plays in a few
tens of ms); the fast labeller's p90 target."""


def compare_table(results: dict[str, list[FastResult]]) -> dict[str, str]:
    """Print the fixed/paced table; returns the headline figures (paced over fixed)."""

    def q(w: list[float], p: float) -> float:
        return float(np.percentile(w, p)) if w else float("nan")

    print("\nfast labeller, fixed --video.ready-ahead (baseline) vs paced render-ahead")
    print(f"{'':<7}{'runs':>5}{'answers':>8}{'p50 s':>8}{'p90 s':>8}{'p99 s':>8}{'max s':>8}"
          f"{'waited':>8}{'no spare':>10}{'p90 per run':>24}")  # fmt: skip
    figures: dict[str, str] = {}
    pooled = {k: [w for r in rs for w in r.waits_s] for k, rs in results.items()}
    for label, runs in results.items():
        w = pooled[label]
        waited = sum(1 for x in w if x > WAITED_S)
        per_run = " ".join(f"{q(r.waits_s, 90):.3f}" for r in runs)
        starved = sum(1 for r in runs for n in r.spare if n <= 0)
        print(
            f"{label:<7}{len(runs):>5}{len(w):>8}{q(w, 50):>8.3f}{q(w, 90):>8.3f}{q(w, 99):>8.3f}"
            f"{max(w, default=float('nan')):>8.3f}{waited / max(len(w), 1):>8.0%}"
            f"{starved / max(len(w), 1):>10.0%}{per_run:>24}"
        )
        figures |= {
            f"{label}_p90_s": f"{q(w, 90):.3f}",
            f"{label}_p99_s": f"{q(w, 99):.3f}",
            f"{label}_waited": f"{waited}/{len(w)}",
            f"{label}_no_spare": f"{starved}/{len(w)}",
        }
    print(f"waited: next pair playing after more than {WAITED_S:g} s; no spare: no pair ready")
    print("besides the one on screen at the press (the next one had to be rendered)")
    fixed, paced = pooled["fixed"], pooled["paced"]
    return {
        "ratio_fast_p90_paced_over_fixed": f"{q(paced, 90) / q(fixed, 90):.2f}",
        "ratio_fast_p99_paced_over_fixed": f"{q(paced, 99) / q(fixed, 99):.2f}",
        **figures,
    }
