"""A full disk is one line on the console, first (issue 32, finding 8, the trainer's half).

The line used to come after ~50 lines of ffmpeg and a traceback of TensorBoard's writer thread.
The disk is filled by injection (an ``OSError(ENOSPC)`` where TensorBoard writes) or by the file
size limit (``RLIMIT_FSIZE``, inherited by ffmpeg), never by filling a real disk.
"""

from __future__ import annotations

import logging
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from rlhf.config import VideoConfig

ROOT = Path(__file__).resolve().parents[2]

_TB_FULL = """
    import errno, sys
    from tests.support.toy_env import register
    register()
    import tensorboard.summary.writer.record_writer as record_writer
    original, writes = record_writer.RecordWriter.write, []
    def write(self, data):  # TensorBoard's writer thread finds the disk full after 30 events
        writes.append(1)
        if len(writes) > 30:
            raise OSError(errno.ENOSPC, "No space left on device")
        return original(self, data)
    record_writer.RecordWriter.write = write
    from rlhf.cli import main
    main(sys.argv[1:])
"""


def test_tensorboard_finding_the_disk_full_is_one_line_without_a_traceback(
    tmp_path: Path,
) -> None:
    args = [
        "train", "--env-id", "rlhf-test/PointGoal-v0", "--total-timesteps", "4096",
        "--feedback", "synthetic", "--runs-dir", str(tmp_path), "--run-name", "full",
        "--no-progress", "--num-steps", "512", "--query.total-labels", "20",
        "--query.segment-length", "10",
    ]  # fmt: skip
    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(_TB_FULL), *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.returncode == 1, result.stderr[-3000:]
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr[-3000:]
    assert lines[0].startswith(
        f"rlhf: error: the disk under {tmp_path / 'full'} is full (No space left on device);"
    )
    assert "; free space, then continue with: " in lines[0]
    assert lines[0].endswith(f"rlhf train --resume {tmp_path / 'full'}")


_FFMPEG_FULL = """
    import os, resource, signal, sys, tempfile
    import numpy as np
    from rlhf.render.video import write_video
    if sys.argv[2] == "enospc":  # the video's temporary file is /dev/full: every write fails
        original = tempfile.mkstemp
        def mkstemp(*args, **kwargs):
            fd, name = original(*args, **kwargs)
            os.close(fd)
            os.unlink(name)
            os.symlink("/dev/full", name)
            return os.open(os.devnull, os.O_RDONLY), name
        tempfile.mkstemp = mkstemp
    else:  # over the file size limit ffmpeg fails at the end, and its exit code went unread
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # then writes fail with EFBIG
        resource.setrlimit(resource.RLIMIT_FSIZE, (20_000, 20_000))
    frames = np.random.default_rng(0).integers(0, 255, (60, 128, 128, 3), dtype=np.uint8)
    try:
        write_video(frames, sys.argv[1], 30)
    except OSError as exc:
        print("refused", type(exc).__name__)
"""


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full (Linux)")
@pytest.mark.parametrize("how", ["enospc", "file-size-limit"])
def test_ffmpeg_on_a_full_disk_prints_nothing_and_leaves_no_video(tmp_path: Path, how: str) -> None:
    out = tmp_path / "a.mp4"
    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(_FFMPEG_FULL), str(out), how],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.stdout.startswith("refused"), result.stdout + result.stderr
    assert result.stderr == ""  # ffmpeg shares the terminal: it printed ~5 lines per video
    assert list(tmp_path.iterdir()) == []  # no video cut short is left to be shown as ready


class _FullStore:
    """A store whose disk is full: every claim fails as SQLite says it then."""

    def claim_policy_clip(self) -> None:
        raise sqlite3.OperationalError("database or disk is full")

    def claim_for_render(self, *args: object, **kwargs: object) -> None:
        raise sqlite3.OperationalError("database or disk is full")


def test_render_workers_leave_a_full_disk_to_the_trainers_one_line(
    caplog: pytest.LogCaptureFixture, tmp_path: Path
) -> None:
    from rlhf.render.worker import _render_policy

    with caplog.at_level(logging.WARNING):
        assert _render_policy(_FullStore(), tmp_path, VideoConfig(), {}) == 0  # type: ignore[arg-type]
    assert caplog.records == []
    locked = _FullStore()
    locked.claim_policy_clip = lambda: (_ for _ in ()).throw(  # type: ignore[method-assign]
        sqlite3.OperationalError("database is locked")
    )
    with caplog.at_level(logging.WARNING):  # anything else is still said
        _render_policy(locked, tmp_path, VideoConfig(), {})  # type: ignore[arg-type]
    assert [r.getMessage() for r in caplog.records] == [
        "render worker (policy clip): OperationalError: database is locked"
    ]
