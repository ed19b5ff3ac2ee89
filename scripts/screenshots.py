"""The labelling guide's screenshots, taken from real runs in headless Chromium.

    MUJOCO_GL=egl .venv/bin/python scripts/screenshots.py [--out docs/images] [--quick]

Starts three small ``rlhf train --feedback human`` runs (HalfCheetah-v5, 4096 env steps) and
labels each to its end in Chromium as a person would, through keys on the page: a pairs run
(``page_pairs.png`` mid-run, ``page_finished.png`` once it has ended), a ratings run
(``--feedback-kind ratings``: ``page_ratings.png``) and a run with two named labellers, alice and
bob, each in a browser of their own (``page_two_labellers.png``, alice's page).

On the way it checks what issue 34 found wrong with the page: Undo is disabled before any
answer, no "1 more labels" (or "1 pairs", "1 videos") anywhere, the header and the progress box
count a wait down together, and the finished page says "finished" in its header and shows the
figures of the run's ``summary.json``. Each check prints one line; the exit status is 1 if any
failed (the screenshots are written all the same). ``--quick`` asks for fewer labels.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

os.environ.setdefault("MUJOCO_GL", "egl")

from rlhf.core.chromium import CHROMIUM, CHROMIUM_ARGS

VIEWPORT = {"width": 1280, "height": 960}
MAX_PNG_BYTES = 300_000
RUN_FLAGS = [
    "--feedback", "human", "--feedback-wait", "--env-id", "HalfCheetah-v5",
    "--total-timesteps", "4096", "--num-steps", "1024", "--num-minibatches", "4",
    "--update-epochs", "1", "--query.initial-fraction", "0.5", "--policy-clip-every", "1",
    "--video.width", "384", "--video.height", "384", "--finish-grace", "5", "--no-progress",
    "--task", "run forward, fast",
]  # fmt: skip
PAIR_KEYS = ["ArrowLeft", "ArrowRight", "ArrowRight", "ArrowLeft", "ArrowDown", "ArrowLeft"]
"""The answers given in turn: mostly one side or the other, now and then "equally good"."""
BAD_PLURALS = re.compile(r"\b1 (more )?(labels|pairs|videos|grades|clips)\b")
RUN_TIMEOUT_S = 600.0


class Checks:
    """Each check prints one line; ``failed`` counts those that did not hold."""

    def __init__(self) -> None:
        self.failed = 0
        self.waits: set[str] = set()
        """Every wait the header said ("waiting for 1 more label"), to show the plurals seen."""

    def __call__(self, ok: bool, what: str) -> None:
        print(("ok      " if ok else "MISMATCH ") + what, flush=True)
        self.failed += not ok


class Run:
    """One ``rlhf train`` in a subprocess; its output is read by a thread (kept for errors)."""

    def __init__(self, runs_dir: Path, name: str, extra: list[str]) -> None:
        self.root = runs_dir / name
        cmd = [sys.executable, "-m", "rlhf", "train", *RUN_FLAGS, *extra]
        cmd += ["--runs-dir", runs_dir.name, "--run-name", name]
        # Run beside the runs folder with the venv on PATH, as a person with it activated would:
        # the finished page then shows "rlhf train --resume runs/pairs ...", no temporary paths.
        path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
        self.proc = subprocess.Popen(
            cmd,
            cwd=runs_dir.parent,
            env={**os.environ, "PATH": path},
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        self.lines: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))

    def links(self, names: tuple[str, ...] = ()) -> dict[str, str]:
        """The page's link (``{"": url}``), or each named labeller's, as the trainer prints them."""
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline and self.proc.poll() is None:
            text = "\n".join(self.lines)
            if not names:
                found = re.search(r"in your browser: (http://\S+)", text)
                if found:
                    return {"": found.group(1)}
            else:
                found = dict(re.findall(r"^\s+(\w+): (http://\S+\?token=\S+)", text, re.M))
                if set(names) <= set(found):
                    return {n: found[n] for n in names}
            time.sleep(0.2)
        raise SystemExit(f"{self.root.name}: no link printed\n" + "\n".join(self.lines[-20:]))

    def summary(self, timeout: float = 180) -> dict:
        self.proc.wait(timeout=timeout)
        return json.loads((self.root / "summary.json").read_text())

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=60)


def _shot(page, path: Path, full: bool = False) -> None:
    """A screenshot of the viewport (or the whole page), its colours reduced when the PNG would
    be over the size limit."""
    page.screenshot(path=str(path), full_page=full)
    if path.stat().st_size > MAX_PNG_BYTES:
        from PIL import Image

        Image.open(path).convert("RGB").quantize(colors=256).save(path, optimize=True)
    print(f"wrote {path} ({path.stat().st_size // 1000} KB)", flush=True)


def _playing(page) -> int | None:
    """The pair or clip on screen once its video plays (None: the run has ended)."""
    page.wait_for_function(
        "() => !document.getElementById('finished').hidden || (() => {"
        " const v = document.querySelector('video.active'); const s = document.getElementById('screen');"
        " return s.dataset.pairId && v.readyState >= 2 && !v.paused && v.currentTime > 0.8; })()",
        timeout=RUN_TIMEOUT_S * 1000,
    )
    if page.locator("#finished").is_visible():
        return None
    return int(page.get_attribute("#screen", "data-pair-id"))


def _look(page, checks: Checks, where: str) -> None:
    """What a person could read at any time: plurals right; a wait counted the same twice."""
    body = page.locator("body").inner_text()
    bad = BAD_PLURALS.search(body)
    if bad:
        checks(False, f"{where}: {bad.group(0)!r} on the page")
    header = page.text_content("#phase") or ""
    box = page.text_content("#learning") or ""
    wait = re.search(r"(\d+) more (label|grade)s?\b", header)
    if wait:
        checks.waits.add(wait.group(0))
    if wait and wait.group(1) not in box:
        checks(False, f"{where}: the header says {header!r}, the box {box!r}")


def label(page, keys: list[str], checks: Checks, until: int | None = None) -> int:
    """Answer with ``keys`` in turn, as each clip plays, until ``until`` answers or the end."""
    given = 0
    while until is None or given < until:
        shown = _playing(page)
        if shown is None:
            break
        _look(page, checks, f"pair {shown}")
        page.keyboard.press(keys[given % len(keys)])
        page.wait_for_function(
            f"() => document.getElementById('screen').dataset.pairId !== '{shown}'"
            " || !document.getElementById('finished').hidden",
            timeout=RUN_TIMEOUT_S * 1000,
        )
        given += 1
    return given


def _finished(page, run: Run, checks: Checks, noun: str) -> None:
    """The finished page against summary.json, read after the run has exited."""
    summary = run.summary()
    page.wait_for_selector("#finished:not([hidden])", timeout=60_000)
    page.wait_for_timeout(1500)  # the last status poll
    text = {k: page.text_content(f"#{k}") or "" for k in (
        "phase", "env-steps", "latest-return", "final-return", "final-steps",
        "final-labels-used", "final-accuracy", "finished-title", "finished-message",
    )}  # fmt: skip
    checks(text["phase"] == "finished", f"{noun}: header says {text['phase']!r}")
    steps = f"{summary['env_steps']:,}"
    checks(text["final-steps"] == steps, f"{noun}: env steps {text['final-steps']} ({steps})")
    checks(text["env-steps"] == steps, f"{noun}: header env steps {text['env-steps']} ({steps})")
    used = str(summary["labels_used"])
    checks(text["final-labels-used"] == used, f"{noun}: used {text['final-labels-used']} ({used})")
    ret = summary["final_true_return"]
    want_return = "-" if ret is None else f"{ret:.1f}"
    got = text["final-return"], text["latest-return"]
    checks(got[0] == want_return, f"{noun}: final return {got[0]} ({want_return})")
    checks(got[1] == want_return, f"{noun}: header return {got[1]} ({want_return})")
    message = text["finished-message"]
    checks("finished" not in message.lower(), f"{noun}: the message {message!r}")
    curve = page.text_content("#curve-true") or ""
    checks(curve in ("-", want_return), f"{noun}: the curve's last return {curve} ({want_return})")
    body = page.locator("body").inner_text()
    checks("not measured yet" not in body, f"{noun}: no 'not measured yet' at the end")
    print(f"info    {noun}: the agent's clip: {page.text_content('#policy-caption')}")
    if noun == "pairs":
        acc = summary["reward_val_accuracy"]
        want = "-" if acc is None else f"{round(100 * acc)}%"
        checks(
            text["final-accuracy"] == want, f"{noun}: accuracy {text['final-accuracy']} ({want})"
        )
    else:  # summary.json has no grade agreement (a short run may hold out too few clips)
        print(f"info    {noun}: grade agreement {text['final-accuracy']}", flush=True)
    _look(page, checks, f"{noun} finished")


@contextmanager
def _chromium() -> Iterator:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()


def pairs_run(browser, runs_dir: Path, out: Path, labels: int, checks: Checks) -> None:
    run = Run(runs_dir, "pairs", ["--query.total-labels", str(labels)])
    try:
        page = browser.new_context(viewport=VIEWPORT).new_page()
        page.goto(run.links()[""])
        _playing(page)
        checks(page.locator("#btn-undo").is_disabled(), "pairs: Undo disabled before any answer")
        label(page, PAIR_KEYS, checks, until=2 * labels // 3)
        checks(page.locator("#btn-undo").is_enabled(), "pairs: Undo enabled after an answer")
        _playing(page)
        _shot(page, out / "page_pairs.png")
        label(page, PAIR_KEYS, checks)
        _finished(page, run, checks, "pairs")
        _shot(page, out / "page_finished.png")
    finally:
        run.stop()
        for context in browser.contexts:  # a tab of an ended run is no part of the next
            context.close()


def ratings_run(browser, runs_dir: Path, out: Path, labels: int, checks: Checks) -> None:
    run = Run(
        runs_dir, "ratings", ["--feedback-kind", "ratings", "--query.total-labels", str(labels)]
    )
    try:
        page = browser.new_context(viewport=VIEWPORT).new_page()
        page.goto(run.links()[""])
        _playing(page)
        checks(page.locator("#btn-undo").is_disabled(), "ratings: Undo disabled before any answer")
        grades = ["3", "1", "4", "2", "0", "3"]
        label(page, grades, checks, until=2 * labels // 3)
        _playing(page)
        _shot(page, out / "page_ratings.png")
        label(page, grades, checks)
        _finished(page, run, checks, "ratings")
    finally:
        run.stop()
        for context in browser.contexts:  # a tab of an ended run is no part of the next
            context.close()


def _now(page) -> str:
    """'ended', the id of the pair playing on ``page``, or '' while none plays."""
    return page.evaluate(
        "() => { if (!document.getElementById('finished').hidden) return 'ended';"
        " const v = document.querySelector('video.active');"
        " const id = document.getElementById('screen').dataset.pairId;"
        " return id && v.readyState >= 2 && !v.paused && v.currentTime > 0.8 ? id : ''; }"
    )


def _answer_if_shown(page, key: str, checks: Checks, who: str) -> bool | None:
    """Answer the pair on ``page`` if one plays; False if none does yet, None once ended."""
    state = _now(page)
    if state == "ended":
        return None
    if not state:
        return False
    _look(page, checks, f"{who}, pair {state}")
    page.keyboard.press(key)
    page.wait_for_function(
        f"() => document.getElementById('screen').dataset.pairId !== '{state}'"
        " || !document.getElementById('finished').hidden",
        timeout=RUN_TIMEOUT_S * 1000,
    )
    return True


def _counts_agree(page, timeout_s: float = 3.0) -> bool:
    """Whether the Labellers box's counts add up to the progress box's labels (in time)."""
    deadline = time.monotonic() + timeout_s
    while True:
        counts = page.locator("#labeller-counts li").all_text_contents()
        total = sum(int(c.rsplit(":", 1)[1].replace(",", "")) for c in counts)
        progress = (page.text_content("#progress-text") or "").split()[0]
        if str(total) == progress.replace(",", ""):
            return True
        if time.monotonic() > deadline:
            print(f"        counts {counts}, progress {page.text_content('#progress-text')!r}")
            return False
        page.wait_for_timeout(100)


def two_labellers_run(browser, runs_dir: Path, out: Path, labels: int, checks: Checks) -> None:
    """alice and bob, each in a browser of their own, answer in turn whatever pair each has
    (one may wait while the other holds the pairs ready), until the run ends."""
    names = ("alice", "bob")
    run = Run(runs_dir, "team", ["--query.total-labels", str(labels), *_each("--labeller", names)])
    try:
        links = run.links(names)
        pages = {n: browser.new_context(viewport=VIEWPORT).new_page() for n in names}
        for name, page in pages.items():
            page.goto(links[name])
        given = dict.fromkeys(names, 0)
        shot = False
        deadline = time.monotonic() + RUN_TIMEOUT_S
        while time.monotonic() < deadline:
            alice = pages["alice"]
            if not shot and min(given.values()) >= 2 and _now(alice) not in ("", "ended"):
                signed = alice.text_content("#signed-in") or ""
                checks(signed == "Signed in as alice", f"two labellers: {signed!r}")
                checks(_counts_agree(alice), "two labellers: the counts add up to the progress")
                _shot(alice, out / "page_two_labellers.png", full=True)
                shot = True
            answered = [
                _answer_if_shown(page, PAIR_KEYS[given[n] % len(PAIR_KEYS)], checks, n)
                for n, page in pages.items()
            ]
            for name, ok in zip(names, answered, strict=True):
                given[name] += bool(ok)
            if all(a is None for a in answered):
                break
            if not any(answered):
                time.sleep(0.3)
        checks(shot and run.summary()["status"] == "finished", f"two labellers: answers {given}")
    finally:
        run.stop()
        for context in browser.contexts:  # a tab of an ended run is no part of the next
            context.close()


def _each(flag: str, values: tuple[str, ...]) -> list[str]:
    return [arg for value in values for arg in (flag, value)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("docs/images"), help="folder for the PNGs")
    parser.add_argument("--quick", action="store_true", help="fewer labels a run (8, not 12)")
    parser.add_argument("--runs-dir", type=Path, help="keep the runs here (default: a temp dir)")
    args = parser.parse_args()
    labels = 8 if args.quick else 12
    args.out.mkdir(parents=True, exist_ok=True)
    checks = Checks()
    with tempfile.TemporaryDirectory(prefix="screenshots_") as tmp, _chromium() as browser:
        runs_dir = (args.runs_dir or Path(tmp) / "runs").resolve()
        runs_dir.mkdir(parents=True, exist_ok=True)
        pairs_run(browser, runs_dir, args.out, labels, checks)
        ratings_run(browser, runs_dir, args.out, labels, checks)
        two_labellers_run(browser, runs_dir, args.out, labels, checks)
    print(f"info    the header's waits: {', '.join(sorted(checks.waits))}")
    print(f"checks_failed={checks.failed}")
    sys.exit(1 if checks.failed else 0)


if __name__ == "__main__":
    main()
