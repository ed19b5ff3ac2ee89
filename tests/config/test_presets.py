"""Per-env presets: unset settings take the env's value, flags win, a run stores what it used."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from rlhf.config import Config, PPOConfig, QueryConfig, RewardConfig, SACConfig
from rlhf.config.presets import (
    DEFAULT,
    family,
    general_queries,
    general_reward,
    idle_settings,
    preset_for,
    with_preset,
)
from rlhf.run.run_dir import read_config
from rlhf.run.runner import run
from tests.support.helpers import tiny_config


@pytest.mark.parametrize(
    ("env_id", "name"),
    [("Ant-v5", "Ant"), ("Ant-v4", "Ant"), ("Ant", "Ant"), ("ALE/Pong-v5", "ALE/Pong"),
     ("AntMaze_UMaze-v5", "AntMaze_UMaze"), ("my-env-vX", "my-env-vX")],
)  # fmt: skip
def test_family_is_the_id_without_its_version(env_id: str, name: str) -> None:
    assert family(env_id) == name


def test_ant_takes_its_preset_and_says_so() -> None:
    cfg, line = with_preset(Config(env_id="Ant-v5"))
    assert (cfg.ppo.init_log_std, cfg.query.replay_share) == (-1.0, 0.3)
    assert line is not None and "--init-log-std -1" in line
    assert "--query.replay-share 0.3" in line and line.startswith("Ant preset:")


def test_an_env_without_a_preset_gets_the_general_defaults_silently() -> None:
    assert preset_for("Swimmer-v5") == DEFAULT
    cfg, line = with_preset(Config(env_id="Swimmer-v5"))
    assert (cfg.ppo.init_log_std, cfg.query.replay_share, line) == (0.0, 0.0, None)
    assert cfg.ppo.end_margin == 0.0
    assert (cfg.reward_model.min_epoch_steps, cfg.reward_model.output_init) == (1, "random")


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        ({}, (32, "zero")),  # a reward to learn: what the preset is for
        ({"reward": "env"}, (1, "random")),  # nothing to learn
        ({"reward_model_file": "saved.pt"}, (1, "random")),  # a trained reward
        ({"algo": "sac"}, (32, "random")),  # SAC's own: 32 steps, from random members
        ({"reward_model": RewardConfig(output_init="random")}, (32, "random")),  # a flag wins
    ],
)
def test_walker2d_reward_members_start_flat_and_train_longer(
    overrides: dict, expected: tuple[int, str]
) -> None:
    cfg, line = with_preset(Config(env_id="Walker2d-v5", **overrides))
    assert (cfg.reward_model.min_epoch_steps, cfg.reward_model.output_init) == expected
    said = line is not None and line.startswith("Walker2d preset: --reward-model.min-epoch-steps")
    assert said == (expected != (1, "random") and "algo" not in overrides)


def test_halfcheetah_reward_members_start_flat_and_train_longer_too() -> None:
    cfg, line = with_preset(Config(env_id="HalfCheetah-v5"))
    assert (cfg.reward_model.min_epoch_steps, cfg.reward_model.output_init) == (32, "zero")
    assert line is not None and line.startswith("HalfCheetah preset: --reward-model.min-epoch")
    ppo, line = with_preset(Config(env_id="HalfCheetah-v5", reward="env"))
    assert (ppo.reward_model.min_epoch_steps, ppo.reward_model.output_init, line) == (
        1,
        "random",
        None,
    )  # the true-reward baseline has no reward to learn and nothing to say


@pytest.mark.parametrize(
    ("overrides", "margin"),
    [
        ({}, 0.3),  # a learned reward with an absorbing end: what the preset is for
        ({"reward": "env"}, 0.0),  # the true-reward baseline has no learned end to move
        ({"terminations": "fixed-horizon"}, 0.0),  # no end at all
        ({"algo": "sac"}, 0.0),  # a PPO setting
        ({"ppo": PPOConfig(end_margin=0.0)}, 0.0),  # a flag given wins
    ],
)
def test_hopper_counts_an_end_below_its_learned_reward(overrides: dict, margin: float) -> None:
    cfg, line = with_preset(Config(env_id="Hopper-v5", **overrides))
    assert cfg.ppo.end_margin == margin
    assert (line is not None and line.startswith("Hopper preset: --end-margin 0.3")) == bool(margin)


@pytest.mark.parametrize(
    ("overrides", "idle"),
    [
        ({}, False),  # a learned absorbing end: the margin moves it
        ({"reward": "env"}, True),
        ({"terminations": "fixed-horizon"}, True),
        ({"algo": "sac"}, True),
        ({"ppo": PPOConfig(end_margin=0.0)}, False),  # 0 changes nothing anywhere
        ({"ppo": PPOConfig()}, False),  # not given: the preset decides, silently
    ],
)
def test_a_margin_given_where_it_does_nothing_says_so(overrides: dict, idle: bool) -> None:
    cfg = Config(env_id="Hopper-v5", **{"ppo": PPOConfig(end_margin=0.3), **overrides})
    lines = idle_settings(cfg)
    assert bool(lines) == idle
    assert all(line.startswith("--end-margin 0.3 does nothing here") for line in lines)


@pytest.mark.parametrize(
    ("overrides", "idle"),
    [
        ({}, False),  # SAC learns the absorbing reward: the margin moves its end
        ({"reward": "env"}, True),
        ({"terminations": "fixed-horizon"}, True),
        ({"algo": "ppo"}, True),
        ({"reward_model_file": "r.pt"}, True),  # SAC bootstraps a saved reward's end from 0
        ({"sac": SACConfig(end_margin=0.0)}, False),
    ],
)
def test_an_sac_end_margin_given_where_it_does_nothing_says_so(overrides: dict, idle: bool) -> None:
    base = {"algo": "sac", "sac": SACConfig(end_margin=1.5)}
    lines = idle_settings(Config(env_id="Ant-v5", **(base | overrides)))
    assert bool(lines) == idle
    assert all(line.startswith("--sac.end-margin 1.5 does nothing here") for line in lines)


def test_a_flag_given_wins_over_the_preset() -> None:
    given = Config(
        env_id="Ant-v5", ppo=PPOConfig(init_log_std=0.0), query=QueryConfig(replay_share=0.1)
    )
    cfg, line = with_preset(given)
    assert (cfg.ppo.init_log_std, cfg.query.replay_share) == (0.0, 0.1)
    assert line is None


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        ({"reward": "env"}, (-1.0, 0.0)),  # the true-reward baseline starts as calm
        ({"terminations": "standard"}, (-1.0, 0.0)),  # replays need a learned end
        ({"algo": "sac"}, (0.0, 0.0)),  # PPO's settings: SAC has neither
    ],
)
def test_replays_are_preset_only_where_they_can_run(
    overrides: dict, expected: tuple[float, float]
) -> None:
    cfg, _ = with_preset(Config(env_id="Ant-v5", **overrides))
    assert (cfg.ppo.init_log_std, cfg.query.replay_share) == expected


def test_a_run_stores_the_preset_it_used_and_a_resume_keeps_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg = tiny_config(
        tmp_path,
        "Ant-v5",
        total_timesteps=1024,
        query=QueryConfig(total_labels=20, segment_length=10),
    )
    assert cfg.ppo.init_log_std is None and cfg.query.replay_share is None
    first = run(cfg)
    said = capsys.readouterr()
    assert "Ant preset: --init-log-std -1" in said.out + said.err
    stored = json.loads((tmp_path / "run" / "config.json").read_text())
    assert (stored["ppo"]["init_log_std"], stored["query"]["replay_share"]) == (-1.0, 0.3)
    assert first.replay_steps > 0  # replayed pairs were asked for
    more = dataclasses.replace(cfg.query, total_labels=40)
    run(dataclasses.replace(cfg, resume=str(tmp_path / "run"), total_timesteps=2048, query=more))
    stored = json.loads((tmp_path / "run" / "config.json").read_text())
    assert (stored["ppo"]["init_log_std"], stored["query"]["replay_share"]) == (-1.0, 0.3)


def test_a_stored_config_from_before_the_presets_keeps_the_general_defaults(
    tmp_path: Path,
) -> None:
    data = Config(env_id="Ant-v5").to_dict()
    del data["ppo"]["init_log_std"], data["query"]["replay_share"]  # as runs wrote them before
    del data["ppo"]["end_value"], data["ppo"]["end_margin"]  # ... and before --end-value
    (tmp_path / "config.json").write_text(json.dumps(data))
    stored = read_config(tmp_path)
    assert (stored.ppo.init_log_std, stored.query.replay_share) == (0.0, 0.0)
    assert stored.ppo.end_value == "absorbing"  # a resumed old run goes on as it ran
    assert stored.ppo.end_margin == 0.0
    assert Config().ppo.end_value == "zero"  # a new one gets today's default
    walker = Config(env_id="Walker2d-v5").to_dict()
    del walker["reward_model"]["min_epoch_steps"], walker["reward_model"]["output_init"]
    (tmp_path / "config.json").write_text(json.dumps(walker))
    stored = read_config(tmp_path)  # a Walker2d run from before its preset goes on as it ran
    assert (stored.reward_model.min_epoch_steps, stored.reward_model.output_init) == (1, "random")


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        ({"algo": "sac"}, (0.0, 100)),  # PEBBLE: every label, up to 100 epochs
        ({}, (0.2, 30)),  # PPO: a fifth held out for early stopping
        ({"algo": "sac", "reward": "env"}, (0.2, 30)),  # nothing to learn
        (
            {"algo": "sac", "reward_model": RewardConfig(val_fraction=0.1)},
            (0.1, 100),
        ),  # a flag wins
    ],
)
def test_sac_fits_every_label_for_longer_on_every_env(overrides: dict, expected: tuple) -> None:
    for env_id in ("HalfCheetah-v5", "Swimmer-v5"):
        cfg, line = with_preset(Config(env_id=env_id, **overrides))
        assert (cfg.reward_model.val_fraction, cfg.reward_model.max_epochs) == expected
        sac_line = line is not None and line.startswith("--algo sac: --reward-model.")
        assert sac_line == (expected[1] == 100)


def test_sac_rounds_make_at_least_32_steps_an_epoch_on_every_env() -> None:
    for env_id in ("HalfCheetah-v5", "Swimmer-v5", "Hopper-v5"):
        cfg, line = with_preset(Config(env_id=env_id, algo="sac"))
        assert cfg.reward_model.min_epoch_steps == 32
        assert line is not None and "--reward-model.min-epoch-steps 32" in line
    given = RewardConfig(min_epoch_steps=1)
    cfg, _ = with_preset(Config(env_id="Swimmer-v5", algo="sac", reward_model=given))
    assert cfg.reward_model.min_epoch_steps == 1  # a flag wins


def test_outside_a_run_the_reward_settings_left_unset_are_the_general_ones() -> None:
    # rlhf reward and the benchmarks fit a RewardConfig that no run has filled.
    filled = general_reward(RewardConfig(max_epochs=7))
    assert (filled.val_fraction, filled.max_epochs) == (DEFAULT.val_fraction, 7)
    assert (filled.min_epoch_steps, filled.output_init) == (1, "random")
    resolved, _ = with_preset(Config(env_id="Walker2d-v5"))
    assert general_reward(resolved.reward_model) == resolved.reward_model  # a run's stays


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        ({"algo": "sac"}, (125, "uniform")),  # PEBBLE asks about what the policy does now
        ({}, (2000, "disagreement")),  # PPO keeps the general defaults
        ({"algo": "sac", "reward": "env"}, (2000, "disagreement")),  # nothing to ask
        ({"algo": "sac", "query": QueryConfig(pool_size=400)}, (400, "uniform")),  # a flag wins
        ({"algo": "sac", "query": QueryConfig(selection="entropy")}, (125, "entropy")),
    ],
)
def test_sac_draws_its_pairs_at_random_from_the_latest_segments(
    overrides: dict, expected: tuple[int, str]
) -> None:
    for env_id in ("HalfCheetah-v5", "dm_control/walker-walk-v0"):
        cfg, line = with_preset(Config(env_id=env_id, **overrides))
        assert (cfg.query.pool_size, cfg.query.selection) == expected
        said = line is not None and "--query.pool-size 125, --query.selection uniform" in line
        assert said == (expected == (125, "uniform"))


def test_a_trainer_built_without_a_preset_takes_the_general_query_settings() -> None:
    filled = general_queries(QueryConfig(pool_size=9))
    assert (filled.pool_size, filled.selection) == (9, DEFAULT.selection)
    resolved, _ = with_preset(Config(env_id="Swimmer-v5", algo="sac"))
    assert general_queries(resolved.query) == resolved.query  # a run's stays


@pytest.mark.parametrize(
    ("overrides", "idle"),
    [
        ({}, False),  # PPO learning a reward from labels: the policy restarts
        ({"reward": "env"}, True),
        ({"algo": "sac"}, True),
        ({"reward_model_file": "saved.pt"}, True),  # a saved reward never changes
    ],
)
def test_a_restart_given_where_it_does_nothing_says_so(overrides: dict, idle: bool) -> None:
    cfg = Config(env_id="Hopper-v5", **{"ppo": PPOConfig(restart_at=0.5), **overrides})
    lines = [line for line in idle_settings(cfg) if "restart" in line]
    assert bool(lines) == idle
    assert all(line.startswith("--restart-at 0.5 does nothing here") for line in lines)
