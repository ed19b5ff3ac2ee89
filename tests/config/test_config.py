"""Config: flags derived from field paths match --help, and config.json round-trips."""

from __future__ import annotations

import dataclasses
import json
import math
import os
import re
import subprocess
import sys

import pytest

import rlhf.config as config_module
from rlhf.cli import Serve, known_flags
from rlhf.config import (
    Config,
    ConfigError,
    PPOConfig,
    QueryConfig,
    RewardConfig,
    SACConfig,
    TeacherConfig,
    VideoConfig,
    WebConfig,
    flag,
)
from rlhf.run.run_dir import RAISE_ONLY, SESSION_ONLY

FLAG = re.compile(r"--[a-z][a-z0-9.-]*[a-z0-9]")


def _help(command: str) -> str:
    result = subprocess.run(
        [sys.executable, "-m", "rlhf", command, "--help"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "COLUMNS": "100"},  # a fixed width, whatever the terminal
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


@pytest.fixture(scope="module")
def train_help() -> str:
    return _help("train")


def _every_validation_message(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Run every validate() with a _check that records instead of raising."""
    recorded: list[str] = []

    def record(cond: bool, template: str, suffix: str = "") -> None:
        recorded.append(config_module.render_flags(template))

    monkeypatch.setattr(config_module, "_check", record)
    Config(run_name="a-run").validate()  # validates every section too
    return recorded


def test_every_validation_message_names_a_flag_that_help_lists(
    monkeypatch: pytest.MonkeyPatch, train_help: str
) -> None:
    messages = _every_validation_message(monkeypatch)
    assert len(messages) >= 35  # every check ran, not just the first one
    for expected in (
        "--query.total-labels must be >= 0",
        "--query.segment-length must be >= 1",
        "--video.width must be >= 16",
        "--video.height must be >= 16",
        "--num-steps x --num-envs must be >= --num-minibatches",
        "--finish-grace must be >= 0",
    ):
        assert expected in messages
    help_flags = set(FLAG.findall(train_help))
    for message in messages:
        named = FLAG.findall(message)
        assert named, message
        for name in named:
            assert name in help_flags, f"{message!r} names {name}, which --help does not list"


def test_resume_rules_name_real_settings(train_help: str) -> None:
    for path in SESSION_ONLY | RAISE_ONLY:
        assert flag(path) in train_help, path


def test_derived_flags_are_exactly_the_flags_help_lists(train_help: str) -> None:
    # Descriptions mention flags too (--feedback synthetic); every one of them must be real.
    assert set(FLAG.findall(train_help)) == known_flags(Config) - {"-h"}
    assert set(FLAG.findall(_help("serve"))) == known_flags(Serve) - {"-h"}


def test_flag_names_follow_the_sections() -> None:
    assert flag("ppo.gamma") == "--gamma"
    assert flag("web.finish_grace") == "--finish-grace"
    assert flag("query.total_labels") == "--query.total-labels"
    assert flag("reward_model.hidden_sizes") == "--reward-model.hidden-sizes"
    assert flag("total_timesteps") == "--total-timesteps"
    for path in ("total_labels", "query.nope", "ppo", "nope.gamma"):
        with pytest.raises(KeyError):
            flag(path)


@pytest.mark.parametrize("command", ["train", "serve"])
def test_help_has_no_none_metavars_and_no_markup(command: str) -> None:
    text = _help(command)
    assert "{None}" not in text
    assert "``" not in text


def _unusual() -> Config:
    return Config(
        env_id="Hopper-v5",
        total_timesteps=12345,
        run_name="x",
        feedback="synthetic",
        ppo=PPOConfig(target_kl=0.02, gamma=0.9),
        query=QueryConfig(total_labels=9, selection="entropy"),
        reward_model=RewardConfig(hidden_sizes=(32, 16, 8)),
        teacher=TeacherConfig(beta=math.inf, mistake=0.1, target="backward"),
        video=VideoConfig(fps=12.5, width=64),
        web=WebConfig(token="t0k", port=8080, finish_grace=0.0),
    )


@pytest.mark.parametrize("cfg", [Config(), _unusual()], ids=["defaults", "unusual"])
def test_from_dict_round_trips_through_json(cfg: Config) -> None:
    text = json.dumps(cfg.to_dict())
    assert "Infinity" in text  # teacher.beta: json writes inf this way and must read it back
    again = Config.from_dict(json.loads(text))
    assert again == cfg
    assert isinstance(again.reward_model.hidden_sizes, tuple)
    assert isinstance(again.query, QueryConfig)
    hash(again)  # frozen all the way down: tuples, not lists


def test_a_target_is_refused_where_her_would_relabel_with_the_envs_reward() -> None:
    her = Config(algo="sac", reward="env", sac=SACConfig(her=True))
    her.validate()
    with pytest.raises(ConfigError, match=r"^--sac\.her with --reward env relabels goals .*"
                       r"--teacher\.target/--teacher\.reward$"):  # fmt: skip
        dataclasses.replace(her, teacher=TeacherConfig(reward="m:f")).validate()
    learned = dataclasses.replace(her, reward="learned", teacher=TeacherConfig(target="speed"))
    learned.validate()  # the learned reward scores relabelled goals; the target only measures


def test_policy_clips_default_to_every_10_with_human_feedback_and_off_otherwise() -> None:
    """--policy-clip-every None: a synthetic run starts no render process unless asked."""
    assert Config().policy_clip_every is None
    assert Config(feedback="human").clip_every() == 10
    assert Config(feedback="synthetic").clip_every() == 0
    assert Config(feedback="synthetic", policy_clip_every=3).clip_every() == 3
    assert Config(feedback="human", policy_clip_every=0).clip_every() == 0
    assert Config.from_dict(json.loads(json.dumps(Config().to_dict()))).policy_clip_every is None
    with pytest.raises(ConfigError, match="--policy-clip-every must be >= 0"):
        Config(feedback="synthetic", policy_clip_every=-1).validate()


def test_from_dict_keeps_defaults_for_missing_keys() -> None:
    cfg = Config.from_dict({"seed": 7, "query": {"total_labels": 3}})
    assert cfg == dataclasses.replace(
        Config(), seed=7, query=dataclasses.replace(QueryConfig(), total_labels=3)
    )


def test_from_dict_refuses_unknown_keys_naming_all_in_one_line() -> None:
    data = {**Config().to_dict(), "colour": "red"}
    data["query"] = {**data["query"], "budget": 3}
    with pytest.raises(ConfigError) as info:
        Config.from_dict(data)
    assert str(info.value) == "unknown settings colour, query.budget"


@pytest.mark.parametrize(
    "data",
    [
        {"total_timesteps": "many"},
        {"total_timesteps": True},
        {"total_timesteps": 1.5},
        {"reward": "magic"},
        {"reward_model": {"hidden_sizes": [64, "wide"]}},
        {"ppo": 3},
        {"ppo": {"learning_rate": None}},
    ],
)
def test_from_dict_refuses_values_of_the_wrong_type(data: dict) -> None:
    with pytest.raises(ConfigError) as info:
        Config.from_dict(data)
    assert "\n" not in str(info.value)
    assert next(iter(data)) in str(info.value)
