"""``rlhf record RUN``: the trained (or latest checkpointed) agent rendered to a video."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import imageio.v3
import imageio_ffmpeg
import pytest
import torch

from rlhf.agent.ppo_learner import PPOLearner
from rlhf.commands.record import Record, record, record_main
from rlhf.config import Config, ConfigError, TeacherConfig, VideoConfig
from rlhf.core.signed import save_atomic
from rlhf.run.checkpoint import save_checkpoint
from rlhf.run.run_dir import RunDir, write_config

SMALL = VideoConfig(width=64, height=64)


def _run(
    tmp_path: Path, checkpoint: str | None, name: str = "r", target: str | None = None
) -> Path:
    """A run directory as a HalfCheetah run leaves it, with an untrained agent saved."""
    teacher = TeacherConfig(target=target)
    cfg = Config(env_id="HalfCheetah-v5", run_name=name, runs_dir=str(tmp_path), teacher=teacher)
    cfg.validate()
    run = RunDir(tmp_path / name)
    (run.root / "checkpoints").mkdir(parents=True)
    write_config(run, cfg)
    agent = PPOLearner(17, 6, 1, cfg.ppo, torch.device("cpu")).state_dict()
    if checkpoint == "agent.pt":
        save_atomic(agent, run.root / "checkpoints" / "agent.pt")
    elif checkpoint == "last.pt":
        save_checkpoint({"agent": agent, "progress": {}}, run.root / "checkpoints" / "last.pt")
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
    done = record(Record(str(root), episodes=2, max_steps=15, video=SMALL))
    out, returns = done.path, done.returns
    assert done.target is None and done.env_returns == []
    assert out == root / "agent.mp4"
    assert len(returns) == 2 and returns[0] != returns[1]  # two episodes, two seeds
    assert _frames(out) == 30
    gif = record(Record(str(root), max_steps=10, out=str(tmp_path / "a.gif"), video=SMALL)).path
    assert gif.read_bytes()[:6] == b"GIF89a"
    strip = record(Record(str(root), max_steps=10, out=str(tmp_path / "a.png"), video=SMALL)).path
    picture = imageio.v3.imread(strip)
    assert picture.shape == (64, 8 * 64 + 7 * 4, 3)  # 8 frames of 64x64, 4-pixel gaps
    assert (picture[:, 64:68] == 255).all() and not (picture[:, :64] == 255).all()


def test_record_reports_the_targets_return_beside_the_envs(tmp_path: Path, capsys) -> None:
    """The same agent and seeds: the env's return of the target run is the plain run's return."""
    plain_root = _run(tmp_path, "agent.pt")
    plain = record(Record(str(plain_root), episodes=2, max_steps=15, video=SMALL))
    root = _run(tmp_path, None, name="t", target="backward")
    shutil.copy(plain_root / "checkpoints" / "agent.pt", root / "checkpoints" / "agent.pt")
    command = Record(str(root), episodes=2, max_steps=15, video=SMALL)
    done = record(command)
    assert done.target == "backward"
    assert done.env_returns == pytest.approx(plain.returns)
    assert done.returns != pytest.approx(done.env_returns)
    record_main(command)
    line = capsys.readouterr().out
    assert "target backward return" in line and "env return" in line


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
