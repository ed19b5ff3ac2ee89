"""Faults: the trainer SIGKILLed at random moments, a full disk, a read-only run directory.

After every kill (of the whole process group: trainer, render worker, ffmpeg) the store passes
``PRAGMA integrity_check``, every label the labelling page saw acknowledged is in it, and
``rlhf train --resume`` continues; the last resume finishes the budget. The moments are drawn
from a seeded generator among: while a person is labelling, while a video is being written,
during reward training, and in the middle of writing a checkpoint.

CI runs two kills of each kind; ``RLHF_FAULT_KILLS=N`` runs N kills per chain at random moments.
"""

from __future__ import annotations

import ctypes
import dataclasses
import itertools
import os
import resource
import signal
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pytest

from rlhf.config import Config, PPOConfig, QueryConfig, VideoConfig, WebConfig
from rlhf.run.checkpoint import load_checkpoint
from rlhf.run.runner import run
from tests.support.faults import Labeller, Session, wait_for

ROOT = Path(__file__).resolve().parents[2]
KILLS = int(os.environ.get("RLHF_FAULT_KILLS", "0") or 0)
TOY = "rlhf-test/PointGoal-v0"


def _toy(runs: Path, steps: int = 6144, labels: int = 40) -> Config:
    return Config(
        env_id=TOY, total_timesteps=steps, feedback="synthetic", runs_dir=str(runs),
        run_name="toy", progress=False, checkpoint_every=1,
        ppo=PPOConfig(num_steps=512, num_minibatches=8),
        query=QueryConfig(total_labels=labels, segment_length=10),
    )  # fmt: skip


def _human(runs: Path) -> Config:
    return Config(
        env_id="InvertedPendulum-v5", total_timesteps=24576 + 4096 * KILLS, feedback="human",
        feedback_pace=False, runs_dir=str(runs),
        run_name="human", progress=False, checkpoint_every=1,
        ppo=PPOConfig(num_steps=512, num_minibatches=4, update_epochs=2),
        query=QueryConfig(total_labels=24 + 4 * KILLS, segment_length=10),
        video=VideoConfig(width=32, height=32), web=WebConfig(finish_grace=0.0),
    )  # fmt: skip


def _args(cfg: Config) -> list[str]:
    args = [
        "--env-id", cfg.env_id, "--total-timesteps", str(cfg.total_timesteps),
        "--feedback", cfg.feedback, "--runs-dir", cfg.runs_dir, "--run-name", str(cfg.run_name),
        "--no-progress", "--checkpoint-every", "1", "--num-steps", str(cfg.ppo.num_steps),
        "--num-minibatches", str(cfg.ppo.num_minibatches),
        "--update-epochs", str(cfg.ppo.update_epochs),
        "--query.total-labels", str(cfg.query.total_labels),
        "--query.segment-length", str(cfg.query.segment_length),
    ]  # fmt: skip
    if cfg.feedback == "human":
        args += ["--video.width", "32", "--video.height", "32", "--finish-grace", "0"]
        args += ["--no-feedback-pace"]  # the run goes on while the labeller is killed and back
    return ["train", *args]


def _store_intact(root: Path, acked: dict[int, str]) -> dict[int, str]:
    """The store passes integrity_check and holds every acknowledged label; returns the labels."""
    con = sqlite3.connect(root / "labels.sqlite")
    try:
        assert con.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        stored = dict(con.execute("SELECT pair_id, answer FROM labels").fetchall())
    finally:
        con.close()
    lost = {p: a for p, a in acked.items() if stored.get(p) != a}
    assert not lost, f"acknowledged labels lost: {lost}"
    return stored


def _kill_plan(rng: np.random.Generator, kinds: list[str]) -> list[str]:
    return kinds if KILLS <= 0 else [str(k) for k in rng.choice(kinds, size=KILLS)]


@pytest.mark.slow
def test_sigkill_while_labelling_and_writing_videos_then_resume(tmp_path: Path) -> None:
    rng = np.random.default_rng(14)
    cfg, root = _human(tmp_path), tmp_path / "human"
    acked: dict[int, str] = {}
    kills, steps = [], []
    for i, moment in enumerate(_kill_plan(rng, ["video", "labelling"])):
        args = _args(cfg) if i == 0 else ["train", "--resume", str(root), "--no-progress"]
        with Session(args, ROOT) as session:
            labeller = Labeller(session.url(), acked, rng)
            if moment == "labelling":
                answers = int(rng.integers(1, 4))
                wait_for(lambda lab=labeller, n=answers: len(lab.acked_now) >= n, session)
                session.sleep(rng.uniform(0, 0.05))  # with answers in flight
            else:
                session.wait_for_file(root / "videos", ".tmp.mp4")
            session.kill()
            labeller.stop()
        assert labeller.errors == []
        kills.append((moment, len(acked)))
        _store_intact(root, acked)
        steps.append(load_checkpoint(root / "checkpoints" / "last.pt")["progress"]["env_steps"])
        assert steps[-1] > 0
    summary = run(dataclasses.replace(cfg, resume=str(root)))
    assert summary.status == "finished" and summary.env_steps == cfg.total_timesteps, kills
    stored = _store_intact(root, acked)
    labelling = sum(moment == "labelling" for moment, _ in kills)
    assert len(acked) >= labelling and len(stored) >= len(acked), (kills, len(stored))
    con = sqlite3.connect(root / "labels.sqlite")
    stuck = con.execute("SELECT COUNT(*) FROM pairs WHERE video_status='rendering'").fetchone()
    con.close()
    assert stuck == (0,)  # the pair whose video was cut off was rendered again or is pending
    kinds = {m: sum(k == m for k, _ in kills) for m in {k for k, _ in kills}}
    print(
        f"\nhuman run: {len(kills)} kills {kinds}; integrity_check ok {len(kills) + 1} of "
        f"{len(kills) + 1}; {len(acked)} acknowledged labels present after every kill "
        f"({len(stored)} stored); {len(kills) - 1} resumes reached their kill moment, "
        f"{_advanced(steps)} of them past the previous checkpoint; the last resume finished "
        f"at {summary.env_steps} steps"
    )


@pytest.mark.slow
def test_sigkill_during_reward_training_and_checkpoint_writing_then_resume(tmp_path: Path) -> None:
    rng = np.random.default_rng(41)
    # A longer chain needs a longer run: every kill waits for one or two fits or checkpoints.
    cfg = _toy(tmp_path, steps=6144 + 4096 * KILLS, labels=40 + 20 * KILLS)
    root = tmp_path / "toy"
    steps, moments = [], _kill_plan(rng, ["fit", "checkpoint"])
    for i, moment in enumerate(moments):
        args = _args(cfg) if i == 0 else ["train", "--resume", str(root), "--no-progress"]
        with Session(args, ROOT, instrument=True) as session:
            wait_for(lambda: (root / "checkpoints" / "last.pt").exists(), session)
            session.wait_for_marker("@FIT" if moment == "fit" else "@CKPT", int(rng.integers(1, 3)))
            session.sleep(rng.uniform(0, 0.1))
            session.kill()
        _store_intact(root, {})
        # The checkpoint is the previous one or the new one, never half of one.
        steps.append(load_checkpoint(root / "checkpoints" / "last.pt")["progress"]["env_steps"])
    assert steps == sorted(steps) and steps[-1] < cfg.total_timesteps, steps
    summary = run(dataclasses.replace(cfg, resume=str(root)))
    assert summary.status == "finished" and summary.env_steps == cfg.total_timesteps
    con = sqlite3.connect(root / "labels.sqlite")
    pairs, labels = con.execute(
        "SELECT COUNT(*), (SELECT COUNT(*) FROM labels) FROM pairs"
    ).fetchone()
    con.close()
    assert pairs == labels == cfg.query.total_labels  # every label, none asked twice
    kinds = {m: moments.count(m) for m in set(moments)}
    print(
        f"\nsynthetic run: {len(steps)} kills {kinds}; integrity_check ok {len(steps)} of "
        f"{len(steps)}; checkpoints at {steps}: {len(steps) - 1} resumes reached their kill "
        f"moment, {_advanced(steps)} of them past the previous checkpoint; the last resume "
        f"finished at {summary.env_steps} steps with {labels} labels, none asked twice"
    )


def _advanced(steps: list[int]) -> int:
    """How many resumes left a later checkpoint than the one they started from."""
    return sum(b > a for a, b in itertools.pairwise(steps))


# -- a full disk and a read-only run directory -------------------------------------------------------
def _limit_file_size(limit: int) -> None:
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # then writes fail with EFBIG instead
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))


def _one_error_line(result: subprocess.CompletedProcess[str]) -> str:
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.returncode == 1, result.stderr[-3000:]
    assert len(lines) == 1 and lines[0].startswith("rlhf: error: "), result.stderr[-3000:]
    assert "Traceback" not in result.stderr
    return lines[0]


@pytest.mark.parametrize(
    ("limit", "labels", "extra", "expected"),
    [
        # SQLite calls a write over the size limit a "disk I/O error" (a full disk: "database
        # or disk is full").
        (150_000, 40, [], "is full or failing (disk I/O error)"),
        # Wide PPO networks make the checkpoint (~1.7 MB) the first file over the limit, far
        # above what the store and its write-ahead log reach with 6 labels.
        (1_000_000, 6, ["--hidden-size", "256"], "reached the file size limit (File too large)"),
    ],
    ids=["store-fills-the-disk", "checkpoint-fills-the-disk"],
)
def test_a_full_disk_is_one_line_and_the_store_survives(
    tmp_path: Path, limit: int, labels: int, extra: list[str], expected: str
) -> None:
    cfg = _toy(tmp_path, steps=3072, labels=labels)
    args = _args(cfg) + extra
    result = Session.run(args, ROOT, preexec_fn=lambda: _limit_file_size(limit))
    line = _one_error_line(result)
    assert expected in line and f"under {tmp_path / 'toy'} " in line, line
    assert "every label stored before it is kept; free space, then continue with:" in line, line
    assert line.endswith(f"rlhf train --resume {tmp_path / 'toy'}"), line
    stored = _store_intact(tmp_path / "toy", {})
    assert len(stored) < labels  # it did stop early


def _drop_root_overrides() -> None:
    """Make root obey file permissions, as any other user does (CAP_DAC_OVERRIDE, ...)."""
    prctl = ctypes.CDLL(None, use_errno=True).prctl
    for cap in (1, 2, 3):  # CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH, CAP_FOWNER
        if prctl(24, cap, 0, 0, 0) != 0:  # PR_CAPBSET_DROP: gone after exec
            raise OSError(ctypes.get_errno(), "PR_CAPBSET_DROP")


def _read_only_tree(root: Path) -> None:
    for path in sorted(root.rglob("*"), reverse=True):
        path.chmod(0o444 if path.is_file() else 0o555)
    root.chmod(0o555)


@pytest.mark.skipif(sys.platform != "linux", reason="drops root's capabilities with prctl")
def test_a_read_only_run_directory_is_one_line_and_the_store_survives() -> None:
    runs = Path(tempfile.mkdtemp(prefix="rlhf-read-only-"))
    try:
        cfg = _toy(runs, steps=1024, labels=10)
        run(cfg)
        root = runs / "toy"
        _read_only_tree(root)
        drop = _drop_root_overrides if os.geteuid() == 0 else None
        for args, expected in (
            (["train", "--resume", str(root), "--total-timesteps", "2048"], "read-only"),
            (["serve", "--run", str(root)], "read-only"),
        ):
            try:
                result = Session.run(args, ROOT, preexec_fn=drop)
            except subprocess.SubprocessError as exc:
                pytest.skip(f"cannot drop root's file-permission override here: {exc}")
            line = _one_error_line(result)
            assert expected in line, line
        assert len(_store_intact(root, {})) == 10
    finally:
        for path in [runs, *runs.rglob("*")]:
            path.chmod(0o755)
        subprocess.run(["rm", "-rf", str(runs)], check=False)
