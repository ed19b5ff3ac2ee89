"""Labels and rewards that outlive a run: ``rlhf train --reward-model`` and ``--labels-from``."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

from rlhf.cli import main
from rlhf.config import Config, ConfigError, PPOConfig, QueryConfig
from rlhf.data.datasets import export_run
from rlhf.run.runner import run
from rlhf.store import LabelStore
from rlhf.sweep.worker import read_curve

pa = pytest.importorskip("pyarrow")
pytest.importorskip("minari")


BAR = 40.0


def _cheetah(runs: Path, name: str, steps: int, **kw) -> Config:
    return Config(
        env_id="HalfCheetah-v5",
        total_timesteps=steps,
        feedback="synthetic",
        runs_dir=str(runs),
        run_name=name,
        progress=False,
        seed=kw.pop("seed", 1),
        **kw,
    )


def _flip_answers(dataset: Path, out: Path) -> None:
    """A copy of ``dataset`` whose every left/right answer is the other one (the control)."""
    import pyarrow.parquet as pq

    shutil.copytree(dataset, out)
    table = pq.read_table(out / "labels.parquet")
    swap = {"left": "right", "right": "left"}
    answers = [swap.get(a, a) for a in table.column("answer").to_pylist()]
    index = table.schema.get_field_index("answer")
    table = table.set_column(index, "answer", pa.array(answers, table.schema.field(index).type))
    pq.write_table(table, out / "labels.parquet")


@pytest.mark.slow
# A hang guard, not a speed test: 293 s in a clean-clone suite run beside two benchmark runs,
# where a 400 s bar came within a quarter of failing correct code (see tests/agent/test_sac.py).
@pytest.mark.timeout(1800)
def test_a_reward_fitted_offline_from_an_exported_run_lets_ppo_improve_halfcheetah(
    tmp_path: Path, capsys, learning_seed, record_property
) -> None:
    """A labelled run's export, fitted offline, trains a fresh PPO run forward: against the same
    PPO run (same seed) on a reward fitted from the same labels with every answer flipped, its
    final true return is far higher. Paired, because HalfCheetah's return after 20k steps swings
    by hundreds from seed to seed. Measured on seeds 1-5 (reuse minus control, mean of the last 5
    episodes, torch 2.13.0): 228, 103, 100, 138, 237; the bar is 40. The unpaired form this
    replaces (the reuse run's last returns over its first, bar 100) gave 165, 26, -21, 194 on
    seeds 1-4, and failed on a fresh install at seed 1."""
    seed = learning_seed(1)
    runs = tmp_path / "runs"
    # A labelled run (synthetic teacher), its labels exported and a reward fitted offline ...
    run(
        _cheetah(
            runs, "src", 20480, seed=seed, query=QueryConfig(total_labels=500, segment_length=50)
        )
    )
    export_run(runs / "src", tmp_path / "d")
    _flip_answers(tmp_path / "d", tmp_path / "flipped")
    main(["reward", "fit", str(tmp_path / "d"), "--out", str(tmp_path / "r.pt")])
    assert "held-out accuracy" in capsys.readouterr().out
    main(["reward", "fit", str(tmp_path / "flipped"), "--out", str(tmp_path / "flipped.pt")])
    # ... that a fresh PPO run trains on without asking a label.
    finals = {}
    for name in ("r", "flipped"):
        model = tmp_path / f"{name}.pt"
        run(_cheetah(runs, name, 20480, seed=seed + 1, reward_model_file=str(model)))
        assert not (runs / name / "labels.sqlite").exists()
        stored = json.loads((runs / name / "config.json").read_text())
        assert stored["reward_model_file"] == str(model.resolve())
        returns = [r for _, r in read_curve(runs / name / "tb")]
        assert len(returns) >= 20  # 1000-step episodes
        finals[name] = float(np.mean(returns[-5:]))
    record_property("measured", finals["r"] - finals["flipped"])
    assert finals["r"] > finals["flipped"] + BAR, finals


@pytest.fixture(scope="module")
def pendulum(tmp_path_factory) -> Path:
    """A finished Pendulum-v1 run with 12 synthetic labels (and its reward_model.pt)."""
    runs = tmp_path_factory.mktemp("runs")
    run(_pendulum(runs, "src", total_labels=12))
    return runs / "src"


def _pendulum(runs: Path, name: str, total_labels: int, **kw) -> Config:
    return Config(
        env_id="Pendulum-v1",
        total_timesteps=1024,
        feedback="synthetic",
        runs_dir=str(runs),
        run_name=name,
        progress=False,
        ppo=PPOConfig(num_steps=512, num_minibatches=4, update_epochs=1),
        query=QueryConfig(total_labels=total_labels, segment_length=25),
        **kw,
    )


def test_a_runs_own_reward_model_trains_a_new_run_and_a_foreign_one_is_refused(
    pendulum: Path, tmp_path: Path, capsys
) -> None:
    saved = pendulum / "checkpoints" / "reward_model.pt"
    assert torch.load(saved, weights_only=True)["env_id"] == "Pendulum-v1"
    summary = run(_pendulum(tmp_path, "reuse", 12, reward_model_file=str(saved)))
    assert summary.status == "finished" and summary.labels_used == 0
    main(["train", "--resume", str(tmp_path / "reuse"), "--total-timesteps", "2048"])
    resumed = json.loads((tmp_path / "reuse" / "summary.json").read_text())
    assert resumed["env_steps"] == 2048 and resumed["sessions"] == 2
    stored = json.loads((tmp_path / "reuse" / "config.json").read_text())
    assert stored["reward_model_file"] == str(saved.resolve())  # resume kept it
    assert not (tmp_path / "reuse" / "labels.sqlite").exists()
    for argv, says in (
        (["--env-id", "HalfCheetah-v5"], "was fitted on Pendulum-v1, not --env-id HalfCheetah-v5"),
        (["--reward", "env"], "--reward-model needs --reward learned"),
    ):
        with pytest.raises(SystemExit):
            main(["train", "--reward-model", str(saved), "--runs-dir", str(tmp_path), *argv])
        err = capsys.readouterr().err
        assert says in err and err.count("\n") == 1, err
    state = torch.load(saved, weights_only=True)
    state.pop("sha256")  # made by hand: no digest to check, so its content is what is refused
    state.pop("env_id")
    state["weights"] = {}
    torch.save(state, tmp_path / "broken.pt")
    with pytest.raises(ConfigError, match="is not a saved reward model"):
        run(_pendulum(tmp_path, "x", 12, reward_model_file=str(tmp_path / "broken.pt")))
    with pytest.raises(ConfigError, match="no such file"):
        run(_pendulum(tmp_path, "y", 12, reward_model_file=str(tmp_path / "none.pt")))
    assert not (tmp_path / "x").exists() and not (tmp_path / "y").exists()


def test_a_reward_for_other_sizes_is_refused(pendulum: Path, tmp_path: Path) -> None:
    state = torch.load(pendulum / "checkpoints" / "reward_model.pt", weights_only=True)
    state.pop("sha256")  # made by hand (no digest), e.g. fitted on a toy dataset
    torch.save(state | {"env_id": None}, tmp_path / "r.pt")
    cfg = _cheetah(tmp_path, "z", 2048, reward_model_file=str(tmp_path / "r.pt"))
    with pytest.raises(
        ConfigError, match="takes 3 observations and 1 actions; HalfCheetah-v5 has 17"
    ):
        run(cfg)


def _first_weight(state: dict) -> str:
    return next(k for k, v in state["weights"].items() if torch.is_tensor(v) and v.numel() > 1)


@pytest.mark.parametrize("damage", ["bytes", "weight", "nan"])
def test_a_damaged_reward_model_is_refused_in_one_line(
    pendulum: Path, tmp_path: Path, capsys, damage: str
) -> None:
    """A reward_model.pt carries a digest of its content (torch's zip reader checks no CRC, so
    overwritten bytes load as other weights) and must hold finite weights."""
    saved = pendulum / "checkpoints" / "reward_model.pt"
    bad = tmp_path / "reward_model.pt"
    if damage == "bytes":  # 4 KiB overwritten in the middle of the file
        data = bytearray(saved.read_bytes())
        mid = len(data) // 2
        data[mid : mid + 4096] = bytes(len(data[mid : mid + 4096]))
        bad.write_bytes(bytes(data))
    else:  # one weight changed, keeping the old digest; or NaN with a digest that matches it
        state = torch.load(saved, weights_only=True)
        key = _first_weight(state)
        state["weights"][key] = state["weights"][key].clone()
        state["weights"][key].view(-1)[0] = float("nan") if damage == "nan" else 0.123
        if damage == "nan":
            state.pop("sha256")
        torch.save(state, bad)
    argv = ["train", "--env-id", "Pendulum-v1", "--reward-model", str(bad)]
    with pytest.raises(SystemExit) as exit_:
        main([*argv, "--runs-dir", str(tmp_path), "--run-name", "r"])
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and err.count("\n") == 1 and "Traceback" not in err, err
    assert err.startswith("rlhf: error: --reward-model ") and str(bad) in err, err
    assert not (tmp_path / "r").exists()


def _used_labels(run_dir: Path) -> list[float]:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(run_dir / "tb"), size_guidance={"scalars": 0})
    events.Reload()
    return [e.value for e in events.Scalars("labels/used")]


@pytest.mark.parametrize("via", ["run", "dataset"])
def test_labels_from_an_earlier_run_seed_a_new_one(
    pendulum: Path, tmp_path: Path, via: str
) -> None:
    source = pendulum
    if via == "dataset":
        export_run(pendulum, tmp_path / "d")
        source = tmp_path / "d"
    summary = run(_pendulum(tmp_path, "seeded", 6, labels_from=str(source)))
    store = LabelStore(tmp_path / "seeded" / "labels.sqlite")
    labels = store.labels()
    imported = [label for label in labels if label.source == "import"]
    old = LabelStore(pendulum / "labels.sqlite").labels()
    assert len(imported) == 12 and len(labels) == 18  # the schedule asked its own 6 on top
    assert [label.answer for label in imported] == [label.answer for label in old]
    assert [label.created_at for label in imported] == [label.created_at for label in old]
    first = store.get_pair(imported[0].pair_id).left
    was = LabelStore(pendulum / "labels.sqlite").get_pair(old[0].pair_id).left
    assert np.array_equal(first.obs, was.obs) and np.array_equal(first.qpos, was.qpos)
    assert _used_labels(tmp_path / "seeded")[0] >= 12  # trained on them from the first round
    assert summary.labels_used == 18
    assert store.get_meta("labels_from")["pairs"] == 12


def test_labels_from_another_env_are_refused_in_one_line(
    pendulum: Path, tmp_path: Path, capsys
) -> None:
    with pytest.raises(SystemExit):
        main(
            [
                "train",
                "--env-id",
                "HalfCheetah-v5",
                "--labels-from",
                str(pendulum),
                "--runs-dir",
                str(tmp_path / "runs"),
                "--feedback",
                "synthetic",
            ]
        )
    err = capsys.readouterr().err
    assert (
        "--labels-from" in err
        and "holds labels for Pendulum-v1, not --env-id HalfCheetah-v5" in err
    )
    assert err.count("\n") == 1 and not (tmp_path / "runs").exists()
    with pytest.raises(SystemExit):
        main(["train", "--reward", "env", "--labels-from", str(pendulum)])
    assert "--labels-from needs --reward learned" in capsys.readouterr().err
    with pytest.raises(ConfigError, match="neither a run directory"):
        run(_pendulum(tmp_path, "n", 6, labels_from=str(tmp_path)))


def test_a_resumed_seeded_run_copies_nothing_twice_and_asks_only_its_own_labels(
    pendulum: Path, tmp_path: Path
) -> None:
    cfg = _pendulum(tmp_path, "seeded", 6, labels_from=str(pendulum))
    run(cfg)
    main(["train", "--resume", str(tmp_path / "seeded"), "--total-timesteps", "2048",
          "--query.total-labels", "8", "--no-progress"])  # fmt: skip
    labels = LabelStore(tmp_path / "seeded" / "labels.sqlite").labels()
    assert sum(label.source == "import" for label in labels) == 12
    assert sum(label.source != "import" for label in labels) == 8


@pytest.fixture(scope="module")
def pendulum_both(tmp_path_factory) -> Path:
    """A finished Pendulum-v1 run with 12 synthetic answers: pairs and graded clips in turn."""
    runs = tmp_path_factory.mktemp("runs")
    run(_pendulum(runs, "src", total_labels=12, feedback_kind="both"))
    return runs / "src"


@pytest.mark.parametrize("via", ["run", "dataset"])
def test_labels_from_copies_ratings_too(pendulum_both: Path, tmp_path: Path, via: str) -> None:
    source = pendulum_both
    if via == "dataset":
        export_run(pendulum_both, tmp_path / "d")
        source = tmp_path / "d"
    old = LabelStore(pendulum_both / "labels.sqlite")
    assert old.ratings() and old.labels()  # the source has both kinds
    run(_pendulum(tmp_path, "seeded", 6, labels_from=str(source), feedback_kind="both"))
    store = LabelStore(tmp_path / "seeded" / "labels.sqlite")
    imported = [r for r in store.ratings() if r.source == "import"]
    assert [(r.grade, r.levels, r.created_at, r.labeller) for r in imported] == [
        (r.grade, r.levels, r.created_at, r.labeller) for r in old.ratings()
    ]
    query = store.get_pair_record(imported[0].pair_id)
    assert query.kind == "rating" and query.left_segment == query.right_segment
    assert query.video_status == "none"  # nobody is asked about it again
    clip = store.get_segment(query.left_segment)
    was = old.get_segment(old.get_pair_record(old.ratings()[0].pair_id).left_segment)
    assert np.array_equal(clip.obs, was.obs) and np.array_equal(clip.qvel, was.qvel)
    copied = len(old.labels()) + len(old.ratings())
    assert store.get_meta("labels_from")["pairs"] == copied
    assert store.counts().labelled == copied + 6  # the schedule asked its own 6 on top
    assert len(store.rated()) >= len([r for r in old.ratings() if r.grade is not None])


def test_labels_from_ratings_on_another_scale_are_refused_in_one_line(
    pendulum_both: Path, tmp_path: Path, capsys
) -> None:
    args = ["train", "--env-id", "Pendulum-v1", "--labels-from", str(pendulum_both),
            "--runs-dir", str(tmp_path / "runs"), "--feedback", "synthetic",
            "--feedback-kind", "both", "--ratings.levels", "5"]  # fmt: skip
    with pytest.raises(SystemExit):
        main(args)
    err = capsys.readouterr().err
    assert "--labels-from" in err and "scale of 7 levels, not the 5 of --ratings.levels" in err
    assert err.count("\n") == 1 and not (tmp_path / "runs").exists()
    # A run that asks no ratings trains on the imported grades on their own scale.
    seed_labels_ok = _pendulum(tmp_path, "pairs", 4, labels_from=str(pendulum_both))
    run(seed_labels_ok)
    assert LabelStore(tmp_path / "pairs" / "labels.sqlite").ratings()
