"""Benchmark: how fast the labelling page and its API answer.

(1) Click to play: a real headless Chromium labels pairs with the Left key; for each label, the
    time from the key event to the next pair's video firing ``playing`` (and to its first frame
    presented, via requestVideoFrameCallback). Median over the labels, with the page's prefetch
    (the next video preloaded in a standby <video>) against ``?prefetch=0`` (load on click), the
    baseline. Each label waits until the pair before it has played, as a person would.
(2) Fast labeller: a real session (render pool, server) with a PPO run beside it; Chromium
    answers 0.4 s after each pair starts playing, 100 times; the wait from key press to the
    next pair playing, p50/p90/p99 (target p90 < 0.1 s, p99 < 0.5 s; see _bench_fast.py).
(3) API latency: scripted labellers on loopback each loop ``GET /api/next`` then
    ``POST /api/label`` against ``serve_in_thread`` running in its own process (so the load
    generator does not share its GIL); 1 labeller alone, 20 at once, and a crowd of 100. Every
    label is durable (fsync) before its 200; afterwards the store is audited: acknowledged
    labels lost, pairs acknowledged as new twice (see _bench_api.py).

    .venv/bin/python scripts/bench_web.py             # 20 labels each way, 100 fast, 20 x 100, 100 x 20
    .venv/bin/python scripts/bench_web.py --quick     # under a minute, smoke check
    .venv/bin/python scripts/bench_web.py --api-only  # no browser
    .venv/bin/python scripts/bench_web.py --fast-only --against-fixed --repeats 2
                                                      # paced render-ahead vs a fixed number

Prints a table, then the headline figures as ``key=value`` pairs on the last line.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from _bench_api import ApiResult, bench_api, make_store
from _bench_fast import FastResult, bench_fast, compare_ready_ahead, compare_table

from rlhf.config import WebConfig
from rlhf.core.chromium import CHROMIUM, CHROMIUM_ARGS
from rlhf.server import serve_in_thread
from rlhf.store import LabelStore

TARGET_CLICK_MS = 100.0
TARGET_FAST_P90_S, TARGET_FAST_P99_S = 0.1, 0.5
"""The fast labeller's targets: key press -> next pair playing, p90 and p99."""

# Listens in the capture phase, before the page's own handlers: the key event's timestamp, and
# every video that starts playing (media events do not bubble, but they are captured).
_PROBE = """
window.__bench = { key: 0, events: [] };
document.addEventListener("keydown", (e) => { window.__bench.key = e.timeStamp; }, true);
document.addEventListener("playing", (e) => {
  const v = e.target;
  const rec = { t: performance.now(), id: v.dataset.pairId, frame: null };
  window.__bench.events.push(rec);
  if (v.requestVideoFrameCallback) v.requestVideoFrameCallback((now) => { rec.frame = now; });
}, true);
"""


# -- fixtures -----------------------------------------------------------------------------------
def make_video(path: Path) -> Path:
    """A 2 s, 516x256 H.264 clip like the render worker's (moving shapes, ~25 fps)."""
    import imageio_ffmpeg

    writer = imageio_ffmpeg.write_frames(
        str(path), (516, 256), fps=25, codec="libx264", pix_fmt_out="yuv420p", macro_block_size=2,
        output_params=["-crf", "23", "-preset", "veryfast", "-movflags", "+faststart"],
    )  # fmt: skip
    writer.send(None)
    yy, xx = np.mgrid[:256, :516]
    for t in range(50):
        frame = ((xx + 3 * t) % 64 < 32).astype(np.uint8)[..., None] * np.uint8(60) + 120
        frame = np.repeat(frame, 3, axis=2)
        blob = (yy - 128 - 60 * np.sin(t / 5)) ** 2 + (xx - 130 - 4 * t) ** 2 < 400
        frame[blob] = (220, 90, 40)
        writer.send(np.ascontiguousarray(frame))
    writer.close()
    return path


# -- (1) click to play ----------------------------------------------------------------------------
@dataclass(frozen=True)
class ClickResult:
    playing_ms: list[float]
    frame_ms: list[float]
    stored: int


def _ready_js(prefetch: bool) -> str:
    standby = (
        "const s = document.querySelector('video.standby');"
        " const next = s.dataset.pairId && s.dataset.pairId !== d;"
        " if (!next || s.readyState < 4) return false;"
        if prefetch
        else ""
    )
    return (
        "() => { const d = document.getElementById('screen').dataset.pairId;"
        " const v = document.querySelector('video.active');"
        " if (!d || v.paused || v.currentTime < 0.3) return false;"
        f" {standby} return d; }}"
    )


def _one_click(page, prefetch: bool) -> tuple[float, float | None]:
    current = page.wait_for_function(_ready_js(prefetch), timeout=15000).json_value()
    page.keyboard.press("ArrowLeft")
    handle = page.wait_for_function(
        """(cur) => { const b = window.__bench;
            const e = b.events.find((r) => r.t >= b.key && r.id !== cur);
            return e && (e.frame !== null || performance.now() - e.t > 500) ?
                { playing: e.t - b.key, frame: e.frame === null ? null : e.frame - b.key } : null; }""",
        arg=current,
        timeout=15000,
    )
    result = handle.json_value()
    page.evaluate("() => { window.__bench.events = []; }")
    return result["playing"], result["frame"]


def bench_click(workdir: Path, labels: int, prefetch: bool, video: Path) -> ClickResult:
    from playwright.sync_api import sync_playwright

    run = workdir / ("prefetch" if prefetch else "no_prefetch")
    run.mkdir()
    store = make_store(run, labels + 2, video)
    handle = serve_in_thread(store, run / "videos", WebConfig())
    playing, frames = [], []
    try:
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
            page = browser.new_page(viewport={"width": 1100, "height": 860})
            page.add_init_script(_PROBE)
            page.goto(handle.url + ("" if prefetch else "?prefetch=0"))
            for _ in range(labels):
                play_ms, frame_ms = _one_click(page, prefetch)
                playing.append(play_ms)
                if frame_ms is not None:
                    frames.append(frame_ms)
            browser.close()
        stored = _wait_stored(store, labels)
    finally:
        handle.stop()
        store.close()
    return ClickResult(playing, frames, stored)


def _wait_stored(store: LabelStore, expected: int, timeout: float = 10.0) -> int:
    deadline = time.monotonic() + timeout
    while store.counts().labelled < expected and time.monotonic() < deadline:
        time.sleep(0.05)
    return store.counts().labelled


# -- report ---------------------------------------------------------------------------------------
def pct(values: list[float], q: float) -> float:
    return float(np.percentile(values, q)) if values else float("nan")


def med(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def _api_table(results: list[ApiResult]) -> None:
    print("\nAPI: GET /api/next + POST /api/label (durable), server in its own process")
    head = f"{'labellers':>9}{'requests':>10}{'req/s':>9}{'p50 ms':>8}{'p99 ms':>9}"
    print(head + f"{'next p99':>10}{'label p99':>11}{'saved':>7}{'dup':>5}{'err':>5}{'lost':>6}")
    for r in results:
        n = len(r.all_ms)
        print(
            f"{r.labellers:>9}{n:>10}{n / r.wall_s:>9.0f}{med(r.all_ms):>8.1f}"
            f"{pct(r.all_ms, 99):>9.1f}{pct(r.next_ms, 99):>10.1f}{pct(r.label_ms, 99):>11.1f}"
            f"{r.saved:>7}{r.duplicates:>5}{r.errors:>5}{r.lost:>6}"
        )


def _fast_table(fast: FastResult) -> dict[str, str]:
    w = fast.waits_s
    print(f"\nfast labeller: {fast.answers} answers 0.4 s after each pair plays, PPO beside it,")
    print(f"{fast.processes} render processes; key press -> next pair playing")
    if fast.policy_clips:
        print(f"{fast.policy_clips} policy clips drawn meanwhile (the agent in view)")
    print(
        f"{'answers':>8}{'p50 s':>8}{'p90 s':>8}{'p99 s':>8}{'max s':>8}{'> 0.5 s':>9}{'stored':>8}"
    )
    late = sum(1 for x in w if x > 0.5)
    print(
        f"{len(w):>8}{pct(w, 50):>8.3f}{pct(w, 90):>8.3f}{pct(w, 99):>8.3f}"
        f"{max(w, default=float('nan')):>8.3f}{late:>9}{fast.stored:>8}"
    )
    print(f"target: p90 < {TARGET_FAST_P90_S:g} s, p99 < {TARGET_FAST_P99_S:g} s")
    return {
        "fast_wait_p50_s": f"{pct(w, 50):.3f}",
        "fast_wait_p90_s": f"{pct(w, 90):.3f}",
        "fast_wait_p99_s": f"{pct(w, 99):.3f}",
        "fast_answers": str(len(w)),
        "render_processes": str(fast.processes),
    }


def report(
    clicks: tuple[ClickResult, ClickResult] | None,
    solo: ApiResult,
    crowd: ApiResult,
    big: ApiResult,
    fast: FastResult | None = None,
) -> None:
    figures: dict[str, str] = {}
    if clicks is not None:
        pre, slow = clicks  # not ``fast``: that is the fast labeller's result
        print("\nclick (Left key) -> next pair playing, headless Chromium, loopback")
        print(f"{'page':<30}{'labels':>8}{'median ms':>11}{'p90 ms':>9}{'frame median ms':>17}")
        for name, r in (("prefetch (default)", pre), ("load on click (?prefetch=0)", slow)):
            print(
                f"{name:<30}{len(r.playing_ms):>8}{med(r.playing_ms):>11.1f}"
                f"{pct(r.playing_ms, 90):>9.1f}{med(r.frame_ms):>17.1f}"
            )
        print(f"target: prefetch median < {TARGET_CLICK_MS:.0f} ms; labels stored: {pre.stored}")
        figures |= {
            # The headline ratio: click to play with the page's prefetch over its baseline
            # (?prefetch=0, load on click), medians of the same invocation; below 1 is faster.
            "ratio_click_prefetch": f"{med(pre.playing_ms) / med(slow.playing_ms):.2f}",
            "click_to_play_ms_median": f"{med(pre.playing_ms):.1f}",
            "click_to_frame_ms_median": f"{med(pre.frame_ms):.1f}",
            "no_prefetch_ms_median": f"{med(slow.playing_ms):.1f}",
        }
    _api_table([solo, crowd, big])
    fast_figures = _fast_table(fast) if fast is not None else {}
    figures |= {
        # The API's ratio: p99 with the crowd of labellers over one labeller's, same invocation.
        "ratio_api_p99_crowd_over_solo": f"{pct(crowd.all_ms, 99) / pct(solo.all_ms, 99):.2f}",
        "api_p99_ms": f"{pct(crowd.all_ms, 99):.1f}",
        "api_median_ms": f"{med(crowd.all_ms):.1f}",
        "api_rps": f"{len(crowd.all_ms) / crowd.wall_s:.0f}",
        "api_p99_1_labeller_ms": f"{pct(solo.all_ms, 99):.1f}",
        "labellers": str(crowd.labellers),
        "api_errors": str(crowd.errors + solo.errors + big.errors),
        "crowd": str(big.labellers),
        "crowd_p50_ms": f"{med(big.all_ms):.1f}",
        "crowd_p99_ms": f"{pct(big.all_ms, 99):.1f}",
        "crowd_labels": str(big.saved),
        "lost": str(solo.lost + crowd.lost + big.lost),
        "duplicated": str(solo.duplicated + crowd.duplicated + big.duplicated),
    }
    figures |= fast_figures  # the fast labeller's waits end the line: the headline
    print(" ".join(f"{k}={v}" for k, v in figures.items()))


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer labels and rounds (< 1 min)")
    parser.add_argument("--api-only", action="store_true", help="skip the browser (no Chromium)")
    parser.add_argument("--labels", type=int, default=20, help="browser labels timed per mode")
    parser.add_argument("--labellers", type=int, default=20, help="concurrent API labellers")
    parser.add_argument("--rounds", type=int, default=100, help="next+label rounds per labeller")
    parser.add_argument("--crowd", type=int, default=100, help="labellers in the largest crowd")
    parser.add_argument("--crowd-rounds", type=int, default=20, help="rounds per crowd labeller")
    parser.add_argument("--fast-answers", type=int, default=100, help="fast labeller's answers")
    parser.add_argument("--fast-only", action="store_true", help="only the fast labeller")
    parser.add_argument(
        "--policy-clip-s",
        type=float,
        default=0.0,
        help="fast labeller: queue a policy clip (the agent in view) every this many seconds",
    )
    parser.add_argument(
        "--against-fixed",
        action="store_true",
        help="with --fast-only: the fast labeller with a fixed --video.ready-ahead (the baseline)"
        " and with the paced render-ahead, alternating; ratios paced over fixed",
    )
    parser.add_argument("--repeats", type=int, default=1, help="--against-fixed: runs per arm")
    return parser


def main() -> None:
    parser = _parser()
    args = parser.parse_args()
    if args.against_fixed and not args.fast_only:
        parser.error("--against-fixed needs --fast-only")
    labels = 10 if args.quick else args.labels
    rounds = 20 if args.quick else args.rounds
    crowd_rounds = 5 if args.quick else args.crowd_rounds
    clicks = fast = None
    with tempfile.TemporaryDirectory(prefix="bench_web_") as tmp:
        work = Path(tmp)
        if args.against_fixed:
            n = 20 if args.quick else args.fast_answers
            figures = compare_table(compare_ready_ahead(work, n, max(1, args.repeats)))
            print(" ".join(f"{k}={v}" for k, v in figures.items()))
            return
        if not args.api_only:
            n = 20 if args.quick else args.fast_answers
            fast = bench_fast(work, n, clip_every_s=args.policy_clip_s)
            if args.fast_only:
                _fast_table(fast)
                w = fast.waits_s
                # No baseline runs here: the ratio is the p90 wait over its target.
                print(
                    f"ratio_fast_p90_over_target={pct(w, 90) / TARGET_FAST_P90_S:.2f}"
                    f" fast_wait_p90_s={pct(w, 90):.3f} fast_wait_p99_s={pct(w, 99):.3f}"
                )
                return
        if not args.api_only:
            video = make_video(work / "clip.mp4")
            clicks = (
                bench_click(work, labels, prefetch=True, video=video),
                bench_click(work, labels, prefetch=False, video=video),
            )
        solo = bench_api(work, 1, rounds * 2)
        crowd = bench_api(work, args.labellers, rounds)
        big = bench_api(work, args.crowd, crowd_rounds)
    report(clicks, solo, crowd, big, fast)
    problems = [r for r in (solo, crowd, big) if r.errors or r.lost or r.duplicated]
    if (clicks is not None and clicks[0].stored != labels) or problems:
        print("warning: labels not stored, API errors, or labels lost/duplicated", file=sys.stderr)


if __name__ == "__main__":
    main()
