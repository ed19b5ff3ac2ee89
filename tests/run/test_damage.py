"""A damaged checkpoint is refused, and numbers that stop being numbers stop the run in one line
(issue 32, finding 5).

A checkpoint with 4 KiB overwritten in the middle used to load: the policy answered NaN and the
run ended far from the cause, with the label store refusing a segment whose return was NaN. A
NaN in ``--env-kwargs`` ended the same way.
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch

from rlhf.agent.ppo_learner import PPOLearner
from rlhf.config import Config, ConfigError, PPOConfig, QueryConfig
from rlhf.run.checkpoint import load_checkpoint
from rlhf.run.lifecycle import RunError
from rlhf.run.runner import run
from rlhf.store import LabelStore
from tests.support.toy_env import ENV_ID, PointGoal

ROOT = Path(__file__).resolve().parents[2]


def _toy(tmp_path: Path, name: str = "toy", env_id: str = ENV_ID, steps: int = 1024) -> Config:
    return Config(
        env_id=env_id, total_timesteps=steps, feedback="synthetic", runs_dir=str(tmp_path),
        run_name=name, progress=False, checkpoint_every=1,
        ppo=PPOConfig(num_steps=512, num_minibatches=8),
        query=QueryConfig(total_labels=20, segment_length=10),
    )  # fmt: skip


def _one_line(result: subprocess.CompletedProcess[str], code: int = 2) -> str:
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.returncode == code, result.stderr[-3000:]
    assert len(lines) == 1 and lines[0].startswith("rlhf: error: "), result.stderr[-3000:]
    return lines[0]


def _rlhf(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "rlhf", *args], cwd=ROOT, capture_output=True, text=True, timeout=120
    )


def test_a_checkpoint_with_4_kib_overwritten_in_the_middle_is_refused(tmp_path: Path) -> None:
    cfg = _toy(tmp_path)
    run(cfg)
    last = tmp_path / "toy" / "checkpoints" / "last.pt"
    size = last.stat().st_size
    with last.open("r+b") as f:
        f.seek(size // 2 - 2048)
        f.write(np.random.default_rng(0).bytes(4096))
    with pytest.raises(ConfigError) as info:
        run(dataclasses.replace(cfg, resume=str(tmp_path / "toy"), total_timesteps=2048))
    line = str(info.value)
    assert "\n" not in line and str(last) in line
    assert "damaged" in line or "cannot be read" in line, line
    assert line.endswith(f"--labels-from {tmp_path / 'toy'} --run-name NEW")


def test_a_checkpoint_whose_weights_changed_fails_its_checksum(tmp_path: Path) -> None:
    cfg = _toy(tmp_path)
    run(cfg)
    last = tmp_path / "toy" / "checkpoints" / "last.pt"
    state = torch.load(last, weights_only=True)  # the digest is kept as it was
    weights = next(v for v in state["agent"]["agent"].values() if v.is_floating_point())
    weights.view(-1)[0] += 1e-3  # one float changed: what a flipped bit in the zip does
    torch.save(state, last)
    with pytest.raises(ConfigError, match="is damaged: its content does not match its checksum"):
        load_checkpoint(last)


def test_record_refuses_a_damaged_or_nan_agent_in_one_line(tmp_path: Path) -> None:
    cfg = dataclasses.replace(_toy(tmp_path), env_id="InvertedPendulum-v5", reward="env")
    cfg = dataclasses.replace(cfg, total_timesteps=512)
    run(cfg)
    root = tmp_path / "toy"
    agent = root / "checkpoints" / "agent.pt"
    state = torch.load(agent, weights_only=True)
    state["agent"]["actor_mean.0.weight"].fill_(float("nan"))
    del state["sha256"]  # as an rlhf before the checksum wrote it: the NaN is what gives it away
    torch.save(state, agent)
    line = _one_line(_rlhf("record", str(root)))
    assert f"{agent} holds non-finite values" in line and "checkpoints/last.pt" in line
    assert not (root / "agent.mp4").exists()
    agent.unlink()  # then the latest checkpoint is recorded: damage it too
    last = root / "checkpoints" / "last.pt"
    state = torch.load(last, weights_only=True)
    state["agent"]["agent"]["actor_mean.0.weight"][0, 0] += 1.0
    torch.save(state, last)
    line = _one_line(_rlhf("record", str(root)))
    assert f"{last} is damaged" in line
    assert not (root / "agent.mp4").exists()


def test_a_policy_that_turns_nan_stops_the_run_and_keeps_the_last_good_checkpoint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    learn = PPOLearner.learn
    calls = []

    def diverging(self: PPOLearner, *args: object, **kwargs: object) -> object:
        stats = learn(self, *args, **kwargs)
        calls.append(1)
        if len(calls) == 2:  # the second update diverges
            with torch.no_grad():
                next(self.agent.parameters()).fill_(float("nan"))
        return stats

    monkeypatch.setattr(PPOLearner, "learn", diverging)
    cfg = _toy(tmp_path, steps=4096)
    with pytest.raises(RunError) as info:
        run(cfg)
    line = str(info.value)
    assert line.startswith("the policy's parameters (in agent.")
    assert "became non-finite (NaN or infinity) at step 1,024" in line
    assert f"--labels-from {tmp_path / 'toy'} --run-name NEW and a lower --learning-rate" in line
    state = load_checkpoint(tmp_path / "toy" / "checkpoints" / "last.pt")  # the good one
    assert state["progress"]["env_steps"] == 512
    assert LabelStore(tmp_path / "toy" / "labels.sqlite").counts().labelled > 0


class _NaNAfter(PointGoal):
    """The toy task, whose reward turns NaN after 600 steps (a simulator that blew up)."""

    steps = 0

    def step(self, action: np.ndarray):
        obs, reward, term, trunc, info = super().step(action)
        type(self).steps += 1
        return obs, (float("nan") if type(self).steps > 600 else reward), term, trunc, info


def test_an_env_that_answers_nan_stops_the_run_in_one_line(tmp_path: Path) -> None:
    env_id = "rlhf-test/NaNAfter-v0"
    if env_id not in gym.registry:
        gym.register(env_id, entry_point=_NaNAfter, max_episode_steps=50)
    _NaNAfter.steps = 0
    with pytest.raises(RunError, match=r"rlhf-test/NaNAfter-v0 returned a non-finite reward"):
        run(_toy(tmp_path, env_id=env_id, steps=2048))
    assert LabelStore(tmp_path / "toy" / "labels.sqlite").counts().labelled > 0


def test_a_nan_in_env_kwargs_is_one_line_before_a_run_directory_exists(tmp_path: Path) -> None:
    result = _rlhf(
        "train", "--env-id", "HalfCheetah-v5", "--feedback", "synthetic", "--runs-dir",
        str(tmp_path), "--run-name", "nan", "--env-kwargs", '{"ctrl_cost_weight": NaN}',
    )  # fmt: skip
    line = _one_line(result)
    assert line == "rlhf: error: --env-kwargs: ctrl_cost_weight is nan; give a finite number"
    assert not (tmp_path / "nan").exists() and "Traceback" not in result.stderr
    assert os.listdir(tmp_path) == []
