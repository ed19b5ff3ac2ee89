"""A finished run's page shows summary.json's figures: one source for every final number."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rlhf.config import Config, PPOConfig, QueryConfig, RewardConfig
from rlhf.config.ratings import RatingsConfig
from rlhf.run.runner import run
from rlhf.server import create_app
from rlhf.store import LabelStore
from tests.support.toy_env import ENV_ID


@pytest.mark.parametrize("kind", ["pairs", "ratings", "pairs, every label"])
def test_the_finished_status_is_the_summary(tmp_path: Path, kind: str) -> None:
    every = kind.endswith("every label")  # no validation split: the newest labels measure it
    kind = kind.split(",")[0]
    cfg = Config(
        env_id=ENV_ID,
        total_timesteps=1500,  # PPO takes whole iterations: the run ends past it, at 1,536
        seed=1,
        feedback="synthetic",
        feedback_kind=kind,  # type: ignore[arg-type]
        runs_dir=str(tmp_path),
        run_name=kind,
        progress=False,
        ppo=PPOConfig(num_steps=512, num_minibatches=8),
        query=QueryConfig(total_labels=40, segment_length=10),
        ratings=RatingsConfig(levels=5),
        reward_model=RewardConfig(val_fraction=0.0 if every else None),
    )
    run(cfg)
    root = tmp_path / kind
    summary = json.loads((root / "summary.json").read_text())
    store = LabelStore(root / "labels.sqlite")
    try:
        status = create_app(store, root / "videos").test_client().get("/api/status").get_json()
    finally:
        store.close()
    assert status["phase"] == "finished" and status["final"] is True
    assert status["feedback_kind"] == kind
    assert status["labels_used"] == summary["labels_used"]
    assert status["env_steps"] == summary["env_steps"] == 1536
    assert status["latest_true_return"] == pytest.approx(summary["final_true_return"])
    if kind == "pairs":
        assert status["reward_accuracy"] == summary["reward_val_accuracy"]
        if every:  # measured all the same, never "held out too few answers"
            assert 0.0 <= summary["reward_val_accuracy"] <= 1.0
    else:  # a ratings run is measured by how it orders graded clips, never "not measured"
        assert summary["reward_val_accuracy"] is None
        assert 0.0 <= status["reward_accuracy"] <= 1.0
