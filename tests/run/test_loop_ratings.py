"""End to end: --feedback-kind ratings and both train a reward from synthetic grades."""

from __future__ import annotations

from pathlib import Path

import pytest
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from rlhf.config import Config, ConfigError, PPOConfig, QueryConfig
from rlhf.config.ratings import RatingsConfig
from rlhf.run.runner import run
from rlhf.store import LabelStore
from tests.support.toy_env import ENV_ID


def _cfg(tmp_path: Path, kind: str) -> Config:
    return Config(
        env_id=ENV_ID,
        total_timesteps=2048,
        seed=1,
        feedback="synthetic",
        feedback_kind=kind,  # type: ignore[arg-type]
        runs_dir=str(tmp_path),
        run_name=kind,
        progress=False,
        ppo=PPOConfig(num_steps=512, num_minibatches=8),
        query=QueryConfig(total_labels=40, segment_length=10),
        ratings=RatingsConfig(levels=5),
    )


@pytest.mark.parametrize("kind", ["ratings", "both"])
def test_synthetic_ratings_train_a_reward(tmp_path: Path, kind: str) -> None:
    summary = run(_cfg(tmp_path, kind))
    root = tmp_path / kind
    store = LabelStore(root / "labels.sqlite")
    ratings, labels = store.ratings(), store.labels()
    assert store.counts().labelled == 40  # the schedule's budget, both kinds together
    if kind == "ratings":
        assert len(ratings) == 40 and not labels
    else:
        assert abs(len(ratings) - len(labels)) <= 1  # asked in turn, mixed
        kinds = [store.get_pair_record(i).kind for i in range(1, 41)]
        assert kinds[:4] == ["pair", "rating", "pair", "rating"]
    assert {r.levels for r in ratings} == {5} and all(r.source == "synthetic" for r in ratings)
    assert store.get_meta("rating_scale")["levels"] == 5
    store.close()
    assert summary.labels_used == 40
    acc = EventAccumulator(str(root / "tb"))
    acc.Reload()
    tags = set(acc.Tags()["scalars"])
    if kind == "ratings":  # ("both" holds out too few clips early on for a figure)
        assert "reward/rating_val_accuracy" in tags and "reward/rating_val_pair_accuracy" in tags
    assert "reward/val_loss" in tags
    assert (root / "checkpoints" / "reward_model.pt").exists()


def test_bad_scales_are_one_line_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"--ratings\.levels must be in"):
        Config(ratings=RatingsConfig(levels=11)).validate()
    with pytest.raises(ConfigError, match=r"--ratings\.names"):
        Config(ratings=RatingsConfig(names=("only one",))).validate()
    bad = tmp_path / "scale.toml"
    bad.write_text("names = [")
    with pytest.raises(ConfigError, match=r"--ratings\.scale-file is not valid"):
        Config(ratings=RatingsConfig(scale_file=str(bad))).validate()
    good = tmp_path / "scale.json"
    good.write_text('{"names": ["failed", "wobbly", "fine"]}')
    scale = Config(ratings=RatingsConfig(scale_file=str(good))).rating_scale()
    assert scale.names == ("failed", "wobbly", "fine") and scale.levels == 3
    assert Config().rating_scale().names[0] == "0 worst"
