"""``rlhf record RUN``: the trained (or latest checkpointed) agent rendered to a video."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import imageio_ffmpeg
import pytest
import torch

from rlhf.agent.ppo_learner import PPOLearner
from rlhf.commands.record import Record, record
from rlhf.config import Config, ConfigError, VideoConfig
from rlhf.run.checkpoint import save_atomic
from rlhf.run.run_dir import RunDir, write_config

SMALL = VideoConfig(width=64, height=64)


def _run(tmp_path: Path, checkpoint: str | None) -> Path:
    """A run directory as a HalfCheetah run leaves it, with an untrained agent saved."""
    cfg = Config(env_id="HalfCheetah-v5", run_name="r", runs_dir=str(tmp_path)).validate()
    run = RunDir(tmp_path / "r")
    (run.root / "checkpoints").mkdir(parents=True)
    write_config(run, cfg)
    agent = PPOLearner(17, 6, 1, cfg.ppo, torch.device("cpu")).state_dict()
    if checkpoint == "agent.pt":
        save_atomic(agent, run.root / "checkpoints" / "agent.pt")
    elif checkpoint == "last.pt":
        save_atomic({"agent": agent, "progress": {}}, run.root / "checkpoints" / "last.pt")
    return run.root


def _frames(path: Path) -> int:
    reader = imageio_ffmpeg.read_frames(str(path))
    meta = next(reader)
    assert meta["codec"] == "h264" and meta["size"] == (64, 64)
    return sum(1 for _ in reader)


@pytest.mark.parametrize("checkpoint", ["agent.pt", "last.pt"])
def test_record_renders_the_saved_agent_episode_after_episode(
    tmp_path: Path, checkpoint: str
) -> None:
    root = _run(tmp_path, checkpoint)
    out, returns = record(Record(str(root), episodes=2, max_steps=15, video=SMALL))
    assert out == root / "agent.mp4"
    assert len(returns) == 2 and returns[0] != returns[1]  # two episodes, two seeds
    assert _frames(out) == 30
    gif, _ = record(Record(str(root), max_steps=10, out=str(tmp_path / "a.gif"), video=SMALL))
    assert gif.read_bytes()[:6] == b"GIF89a"


def test_record_says_in_one_line_what_is_missing(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no such run directory"):
        record(Record(str(tmp_path / "nope")))
    (tmp_path / "empty").mkdir()
    with pytest.raises(ConfigError, match=r"no config\.json"):
        record(Record(str(tmp_path / "empty")))
    root = _run(tmp_path, None)
    with pytest.raises(ConfigError, match=r"no checkpoints/agent\.pt or checkpoints/last\.pt"):
        record(Record(str(root)))
    result = subprocess.run(
        [sys.executable, "-m", "rlhf", "record", str(root)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and "rlhf: error: rlhf record" in result.stderr
