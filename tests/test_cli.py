"""Bad command-line input: exit code 2 and one line on stderr, never a traceback."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest


def _rlhf(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "rlhf", *args], capture_output=True, text=True, cwd=cwd, timeout=120
    )


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["train", "--env-id", "HalfCheetah-v0"], "unknown environment id 'HalfCheetah-v0'"),
        (["train", "--env-id", "CartPole-v1"], "continuous"),
        (["train", "--total-timesteps", "abc"], "--total-timesteps"),
        (["train", "--no-such-flag", "1"], "--no-such-flag"),
        (["train", "--gamma", "1.5"], "--gamma must be in [0, 1]"),
        (["train", "--num-envs", "0"], "--num-envs must be >= 1"),
        (["train", "--reward", "magic"], "--reward"),
        (["serve", "--run", "does/not/exist"], "not a run directory"),
        (["fly"], "fly"),
    ],
)
def test_bad_input_is_one_line_and_exit_code_2(
    args: list[str], needle: str, tmp_path: Path
) -> None:
    result = _rlhf(*args, cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip() and "WARNING" not in line]
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("rlhf: error:")
    assert needle in lines[0]
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "runs").exists()


def test_help_lists_the_common_flags(tmp_path: Path) -> None:
    result = _rlhf("train", "--help", cwd=tmp_path)
    assert result.returncode == 0
    for flag in (
        "--env-id",
        "--total-timesteps",
        "--seed",
        "--run-name",
        "--runs-dir",
        "--reward",
        "--device",
        "--num-envs",
        "--learning-rate",
        "--num-steps",
    ):
        assert flag in result.stdout, flag
