"""scripts/bench_rlhf.py's --set: further rlhf train settings for the RLHF runs, checked up front,
applied to the run's config and named in a result's file, so a cached result is reused only for
the same settings."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

from rlhf.config import Config
from rlhf.sweep.spec import SpecError

BENCH = Path(__file__).resolve().parents[2] / "scripts" / "bench_rlhf.py"


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("bench_rlhf", BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_rlhf"] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def test_set_reaches_the_config_of_the_run(bench) -> None:
    settings = bench._set_flags(
        ["query.segment-length=25", "reward-model.hidden-sizes=[128, 128]", "gamma=0.995"]
    )
    assert settings == (
        ("query.segment_length", 25),
        ("reward_model.hidden_sizes", (128, 128)),
        ("ppo.gamma", 0.995),
    )
    cfg = bench.with_settings(Config(env_id="Walker2d-v5"), settings)
    assert cfg.query.segment_length == 25
    assert cfg.reward_model.hidden_sizes == (128, 128)
    assert cfg.ppo.gamma == 0.995
    assert cfg.env_id == "Walker2d-v5"  # the rest as it was


@pytest.mark.parametrize(
    ("item", "message"),
    [
        ("query.segment-lenght=25", "did you mean query.segment-length"),
        ("query.segment-length=many", "is not a value it takes"),
        ("query.segment-length", "expected KEY=VALUE"),
        ("query.total_labels=200", "--set query.total-labels: .* use its --labels"),
        ("end-margin=0.3", "use its --end-margin"),
        ("reward=env", "the benchmark sets it"),
        ("gamma=2", "--gamma must be in"),  # out of range: refused before any run
    ],
)
def test_a_bad_or_owned_setting_is_one_line(bench, item: str, message: str) -> None:
    with pytest.raises(SpecError, match=message):
        bench._set_flags([item])


def test_a_result_is_reused_only_for_the_same_settings(bench, tmp_path: Path) -> None:
    plain = bench.Job("Walker2d-v5", "rlhf", 1, 1000, 10)
    short = bench.Job("Walker2d-v5", "rlhf", 1, 1000, 10, settings=(("query.segment_length", 25),))
    wide = bench.Job(
        "Walker2d-v5", "rlhf", 1, 1000, 10, settings=(("reward_model.hidden_sizes", (128, 128)),)
    )
    assert len({plain.key, short.key, wide.key}) == 3
    assert short.key.endswith("__query.segment_length=25")
    result = bench.Result(wide, 1.0, 2.0, 10, 0.9, [(1, 2.0)])
    (tmp_path / f"{wide.key}.json").write_text(json.dumps(bench.asdict(result)))
    loaded = bench._load(tmp_path)
    assert list(loaded) == [wide.key]
    assert loaded[wide.key].job == wide  # the settings' tuples survive JSON


def test_the_preset_is_resolved_with_the_settings(bench) -> None:
    # Hopper's margin moves a learned end: with a fixed horizon there is none, as in rlhf train.
    assert bench._settings("Hopper-v5", "rlhf", None, None, None)["end_margin"] == 0.3
    fixed = (("terminations", "fixed-horizon"),)
    assert bench._settings("Hopper-v5", "rlhf", None, None, None, fixed)["end_margin"] == 0.0
