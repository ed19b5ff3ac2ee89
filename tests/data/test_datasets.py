"""rlhf export / rlhf import: a run's labelled data as Parquet files, and back, exactly."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from rlhf.cli import main
from rlhf.config import Config, ConfigError, PPOConfig, QueryConfig, RewardConfig
from rlhf.core.shell import install_extra
from rlhf.core.types import Answer, Pair, Segment
from rlhf.data.datasets import export_run, import_dataset
from rlhf.data.reading import read_preferences, read_ratings, read_segments
from rlhf.reward.fit import fit_offline
from rlhf.reward.learner import RewardLearner
from rlhf.run.runner import run
from rlhf.store import LabelStore
from tests.support.helpers import tiny_config
from tests.support.segments import first_coordinate_segment, random_segment

pq = pytest.importorskip("pyarrow.parquet")


@pytest.fixture(scope="module")
def source(tmp_path_factory) -> Path:
    """A real run with labels: Pendulum-v1, synthetic teacher."""
    runs = tmp_path_factory.mktemp("runs")
    run(
        Config(
            env_id="Pendulum-v1",
            total_timesteps=1024,
            feedback="synthetic",
            runs_dir=str(runs),
            run_name="src",
            progress=False,
            task="swing up, then hold still",
            ppo=PPOConfig(num_steps=512, num_minibatches=4, update_epochs=1),
            query=QueryConfig(total_labels=12, segment_length=25),
        )
    )
    return runs / "src"


def test_export_import_export_gives_the_same_files_and_the_same_labels(
    source: Path, tmp_path: Path
) -> None:
    store_bytes = (source / "labels.sqlite").read_bytes()
    first = export_run(source, tmp_path / "a")
    assert (source / "labels.sqlite").read_bytes() == store_bytes  # the run is only read
    assert first.labels == 12 and first.pairs >= 12 and first.segments >= 2 * first.pairs
    again = import_dataset(tmp_path / "a", tmp_path / "copy")
    assert again == first
    export_run(tmp_path / "copy", tmp_path / "b")
    for name in ("segments.parquet", "pairs.parquet", "labels.parquet"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()

    old, new = LabelStore(source / "labels.sqlite"), LabelStore(tmp_path / "copy/labels.sqlite")
    assert new.labels() == old.labels()  # answers, sources, labellers, times
    assert [p.mu for p in new.preferences()] == [p.mu for p in old.preferences()]
    assert new.get_meta("env_id") == "Pendulum-v1"
    assert new.get_meta("task") == "swing up, then hold still"  # what the labels mean
    assert json.loads((tmp_path / "b" / "dataset.json").read_text())["task"] == new.get_meta("task")
    assert json.loads((tmp_path / "b" / "dataset.json").read_text())["target"] is None  # env's
    for label in old.labels():
        was, now = old.get_pair(label.pair_id), new.get_pair(label.pair_id)
        for a, b in ((was.left, now.left), (was.right, now.right)):
            for field in ("obs", "actions", "true_rewards", "qpos", "qvel"):
                x, y = getattr(a, field), getattr(b, field)
                assert x.dtype == y.dtype and np.array_equal(x, y)
            assert (a.env_id, a.start_step, a.absorbing) == (b.env_id, b.start_step, b.absorbing)


def test_a_dataset_says_whose_reward_its_true_rewards_are(source: Path, tmp_path: Path) -> None:
    """A run with --teacher.target: its segments' true rewards are the target's, and say so."""
    shutil.copytree(source, tmp_path / "run")
    store = LabelStore(tmp_path / "run" / "labels.sqlite")
    store.set_meta("target", "backward")
    store.close()
    export_run(tmp_path / "run", tmp_path / "a")
    assert json.loads((tmp_path / "a" / "dataset.json").read_text())["target"] == "backward"
    import_dataset(tmp_path / "a", tmp_path / "copy")
    assert LabelStore(tmp_path / "copy" / "labels.sqlite").get_meta("target") == "backward"


def test_the_files_are_plain_parquet_with_the_documented_columns(
    source: Path, tmp_path: Path
) -> None:
    export_run(source, tmp_path / "d")
    labels = pq.read_table(tmp_path / "d" / "labels.parquet")
    assert {"pair_id", "answer", "source", "labeller", "response_ms", "created_at"} <= set(
        labels.column_names
    )
    pairs = pq.read_table(tmp_path / "d" / "pairs.parquet").column_names
    assert {"id", "left_segment", "right_segment"} <= set(pairs) and "video_path" not in pairs
    segments = read_segments(tmp_path / "d")
    first = next(iter(segments.values()))
    assert first.obs.shape == (25, 3) and first.qpos.shape[0] == 25
    info = json.loads((tmp_path / "d" / "dataset.json").read_text())
    assert info["format"] == "rlhf-preferences" and info["schema_version"] == 3


def test_bad_input_is_one_line_and_changes_nothing(source: Path, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not a run directory"):
        export_run(tmp_path, tmp_path / "x")
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "mine.txt").write_text("keep")
    with pytest.raises(ConfigError, match="not empty"):
        export_run(source, tmp_path / "full")
    export_run(source, tmp_path / "d")
    with pytest.raises(ConfigError, match="exists; import into a new directory"):
        import_dataset(tmp_path / "d", source)
    info = json.loads((tmp_path / "d" / "dataset.json").read_text())
    (tmp_path / "d" / "dataset.json").write_text(json.dumps(info | {"schema_version": 99}))
    with pytest.raises(ConfigError, match="newer than this rlhf reads"):
        import_dataset(tmp_path / "d", tmp_path / "new")
    assert not (tmp_path / "new" / "labels.sqlite").exists()


def test_cli_round_trip_and_missing_pyarrow(
    source: Path, tmp_path: Path, capsys, monkeypatch
) -> None:
    main(["export", str(source), str(tmp_path / "d")])
    main(["import", str(tmp_path / "d"), str(tmp_path / "r")])
    out = capsys.readouterr().out
    assert "12 labels" in out and str(tmp_path / "r" / "labels.sqlite") in out
    monkeypatch.setitem(sys.modules, "pyarrow", None)
    with pytest.raises(SystemExit):
        main(["export", str(source), str(tmp_path / "e")])
    err = capsys.readouterr().err
    assert install_extra("data") in err and err.count("\n") == 1


def _labelled_store(path: Path, pairs: int, seed: int = 0) -> None:
    """Random 10-step segments whose true reward is the first observation coordinate, each pair
    labelled by the true returns (an ideal teacher)."""
    rng = np.random.default_rng(seed)
    made = [
        Pair(first_coordinate_segment(rng), first_coordinate_segment(rng)) for _ in range(pairs)
    ]
    answers = [
        Answer.LEFT if p.left.true_return > p.right.true_return else Answer.RIGHT for p in made
    ]
    LabelStore(path / "labels.sqlite").add_pairs_with_labels(made, answers, "synthetic")


def test_a_reward_fitted_offline_from_a_dataset_ranks_held_out_pairs(tmp_path: Path) -> None:
    """Data and fit seeds 1-5 (torch 2.13.0): held-out accuracy 0.95-0.98, Pearson 0.96-0.98."""
    _labelled_store(tmp_path / "run", pairs=300)
    export_run(tmp_path / "run", tmp_path / "d")
    prefs = read_preferences(tmp_path / "d")
    assert len(prefs) == 300
    _, result = fit_offline(prefs, RewardConfig(), test_fraction=0.2, seed=1)
    assert (result.train_labels, result.test_labels) == (240, 60)
    assert result.test_accuracy >= 0.85 and result.test_pearson >= 0.8, result


def test_cli_reward_fit_saves_a_loadable_reward(tmp_path: Path, capsys) -> None:
    _labelled_store(tmp_path / "run", pairs=60)
    export_run(tmp_path / "run", tmp_path / "d")
    main(["reward", "fit", str(tmp_path / "d"), "--out", str(tmp_path / "r.pt")])
    assert "held-out accuracy" in capsys.readouterr().out
    state = torch.load(tmp_path / "r.pt", weights_only=True)
    learner = RewardLearner.from_state_dict(state)
    assert learner.fitted_on == 48 and state["env_id"] is None
    assert learner.score(np.zeros((2, 3), np.float32), np.zeros((2, 1), np.float32)).shape == (2,)


def _physics_store(path: Path) -> list[Pair]:
    """Pairs of MuJoCo-like segments (qpos and qvel of width 2 and 3), some ending in an
    absorbing state, labelled by two named labellers."""
    rng = np.random.default_rng(3)

    def segment(absorbing: int) -> Segment:
        obs = rng.normal(size=(8, 4)).astype(np.float32)
        obs[8 - absorbing :] = 0
        return Segment(
            obs=obs,
            actions=rng.uniform(-1, 1, (8, 2)).astype(np.float32),
            true_rewards=rng.normal(size=8).astype(np.float32),
            qpos=rng.normal(size=(8, 2)),
            qvel=rng.normal(size=(8, 3)),
            env_id="HalfCheetah-v5",
            start_step=int(rng.integers(1000)),
            absorbing=absorbing,
        )

    pairs = [Pair(segment(i % 3), segment(0)) for i in range(6)]
    store = LabelStore(path / "labels.sqlite")
    ids = store.add_pairs(pairs)
    for i, pair_id in enumerate(ids[:5]):
        store.mark_video(pair_id, "ready", f"{pair_id}.mp4")
        answer = list(Answer)[i % 4]
        store.add_label(pair_id, answer, labeller=f"ann{i % 2}", response_ms=100 + i)
    store.close()
    return pairs


def test_segments_are_a_minari_dataset_that_minari_reads(tmp_path: Path) -> None:
    minari = pytest.importorskip("minari")
    pairs = _physics_store(tmp_path / "run")
    export_run(tmp_path / "run", tmp_path / "d")
    info = json.loads((tmp_path / "d" / "dataset.json").read_text())
    path = tmp_path / "d" / info["minari"]["path"]
    episodes = list(minari.MinariDataset(str(path)).iterate_episodes())
    assert len(episodes) == 12  # one per segment
    index = pq.read_table(tmp_path / "d" / "segments.parquet").to_pylist()
    first = pairs[0].left  # segment 1 is episode 0
    ep = episodes[index[0]["episode_id"]]
    assert ep.observations.shape == (9, 4) and np.array_equal(ep.observations[:8], first.obs)
    assert np.array_equal(ep.observations[8], first.obs[7])  # T + 1: the last one repeated
    assert np.array_equal(ep.rewards, first.true_rewards)
    assert np.array_equal(ep.infos["qpos"][:8], first.qpos)
    assert np.array_equal(ep.infos["qvel"][:8], first.qvel)
    ended = pairs[1].left  # absorbing == 1: the episode ended inside the segment
    ep = episodes[index[2]["episode_id"]]
    assert ep.terminations[-1] and not ep.truncations.any() and index[2]["absorbing"] == 1
    assert not episodes[index[0]["episode_id"]].terminations.any()
    assert episodes[index[0]["episode_id"]].truncations[-1]
    assert np.array_equal(ep.actions, ended.actions)
    labels = pq.read_table(tmp_path / "d" / "labels.parquet").to_pylist()
    # A label names its segments by (episode id, start, length), as offline datasets do.
    assert (labels[0]["left_episode"], labels[0]["left_start"], labels[0]["left_length"]) == (
        0,
        0,
        8,
    )
    assert "MINARI_DATASETS_PATH" not in __import__("os").environ


def test_minari_recovers_the_runs_env_with_its_kwargs(tmp_path: Path, monkeypatch) -> None:
    """The Minari dataset stores the env spec (with the run's --env-kwargs), so Minari's own
    ``recover_environment()`` makes the env the segments came from."""
    minari = pytest.importorskip("minari")
    query = QueryConfig(total_labels=4, segment_length=20)
    run(tiny_config(tmp_path / "runs", "Pendulum-v1", env_kwargs='{"g": 9.0}', query=query))
    export_run(tmp_path / "runs" / "run", tmp_path / "d")
    monkeypatch.setenv("MINARI_DATASETS_PATH", str(tmp_path / "d" / "minari"))
    dataset = minari.load_dataset("rlhf/segments-v0")
    env = dataset.recover_environment()
    try:
        assert env.spec.id == "Pendulum-v1" and env.spec.kwargs["g"] == 9.0
        assert env.unwrapped.g == 9.0 and env.spec.max_episode_steps == 200
        assert env.action_space.shape == dataset.action_space.shape
        assert env.observation_space.shape == dataset.observation_space.shape
    finally:
        env.close()


def test_round_trip_is_bit_exact_with_physics_absorbing_and_labellers(tmp_path: Path) -> None:
    _physics_store(tmp_path / "run")
    export_run(tmp_path / "run", tmp_path / "a")
    import_dataset(tmp_path / "a", tmp_path / "copy")
    export_run(tmp_path / "copy", tmp_path / "b")
    for name in ("segments.parquet", "pairs.parquet", "labels.parquet"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()
    a, b = read_segments(tmp_path / "a"), read_segments(tmp_path / "b")
    original = LabelStore(tmp_path / "run" / "labels.sqlite")
    assert sorted(a) == sorted(b) and len(a) == 12
    for seg_id, seg in a.items():
        for other in (b[seg_id], original.get_segment(seg_id)):
            for field in ("obs", "actions", "true_rewards", "qpos", "qvel"):
                x, y = getattr(seg, field), getattr(other, field)
                assert x.dtype == y.dtype and x.shape == y.shape and np.array_equal(x, y)
            assert (seg.env_id, seg.start_step, seg.absorbing) == (
                other.env_id,
                other.start_step,
                other.absorbing,
            )
    copy = LabelStore(tmp_path / "copy" / "labels.sqlite")
    assert copy.labels() == original.labels()
    assert {label.labeller for label in copy.labels()} == {"ann0", "ann1"}
    assert copy.counts().pairs == 6  # the unlabelled pair too


def _as_version_1(dataset: Path) -> None:
    """Rewrite a dataset the way schema 1 stored it: arrays in segments.parquet, no Minari."""
    import shutil

    segments = read_segments(dataset)
    rows = [
        {"id": i, "env_id": s.env_id, "start_step": s.start_step, "absorbing": s.absorbing}
        | {k: getattr(s, k).tolist() for k in ("obs", "actions", "true_rewards", "qpos", "qvel")}
        for i, s in segments.items()
    ]
    pq.write_table(__import__("pyarrow").Table.from_pylist(rows), dataset / "segments.parquet")
    shutil.rmtree(dataset / "minari")
    info = json.loads((dataset / "dataset.json").read_text())
    (dataset / "dataset.json").write_text(json.dumps(info | {"schema_version": 1}))


def test_a_schema_1_dataset_still_imports(tmp_path: Path) -> None:
    _physics_store(tmp_path / "run")
    export_run(tmp_path / "run", tmp_path / "d")
    _as_version_1(tmp_path / "d")
    import_dataset(tmp_path / "d", tmp_path / "copy")
    original = LabelStore(tmp_path / "run" / "labels.sqlite")
    copy = LabelStore(tmp_path / "copy" / "labels.sqlite")
    assert copy.labels() == original.labels()
    for seg_id in range(1, 13):
        assert np.array_equal(copy.get_segment(seg_id).qvel, original.get_segment(seg_id).qvel)
    assert len(read_preferences(tmp_path / "d")) == 4  # one skip of five labels


def test_without_minari_export_says_how_to_install_it(tmp_path: Path, monkeypatch, capsys) -> None:
    _physics_store(tmp_path / "run")
    monkeypatch.setitem(sys.modules, "minari", None)
    with pytest.raises(SystemExit):
        main(["export", str(tmp_path / "run"), str(tmp_path / "e")])
    err = capsys.readouterr().err
    assert "minari" in err and install_extra("data") in err and err.count("\n") == 1


SCALE = {"levels": 4, "names": ["fell", "wobbly", "ok", "graceful"]}


def _rated_store(path: Path) -> list[Pair]:
    """_physics_store's pairs and labels, plus graded clips: synthetic (one skipped), human
    (named labellers, response times, one skipped) and one clip still waiting for a grade."""
    pairs = _physics_store(path)
    rng = np.random.default_rng(4)
    clips = [
        random_segment(rng, 8, obs_dim=4, nv=3, start_step=7 * i, absorbing=i % 2) for i in range(6)
    ]
    store = LabelStore(path / "labels.sqlite")
    store.set_meta("rating_scale", SCALE)
    store.add_rated_clips(clips[:3], [3, None, 0], levels=4, source="synthetic", iteration=2)
    asked = store.add_rating_queries(clips[3:], iteration=5)
    for i, query in enumerate(asked[:2]):
        store.mark_video(query, "ready", f"{query}.mp4")
        grade = [2, None][i]
        store.add_rating(query, grade, 4, labeller=f"ann{i}", response_ms=900 + i)
    store.close()
    return pairs


def test_round_trip_keeps_ratings_kinds_and_the_grade_scale(tmp_path: Path) -> None:
    _rated_store(tmp_path / "run")
    first = export_run(tmp_path / "run", tmp_path / "a")
    assert (first.pairs, first.labels, first.ratings) == (12, 5, 5)
    assert import_dataset(tmp_path / "a", tmp_path / "copy") == first
    export_run(tmp_path / "copy", tmp_path / "b")
    for name in ("segments", "pairs", "labels", "ratings"):
        assert (tmp_path / "a" / f"{name}.parquet").read_bytes() == (
            tmp_path / "b" / f"{name}.parquet"
        ).read_bytes()
    for d in ("a", "b"):
        info = json.loads((tmp_path / d / "dataset.json").read_text())
        assert info["schema_version"] == 3 and info["rating_scale"] == SCALE
        assert info["counts"]["ratings"] == 5
    original = LabelStore(tmp_path / "run" / "labels.sqlite")
    copy = LabelStore(tmp_path / "copy" / "labels.sqlite")
    assert copy.ratings() == original.ratings()  # grades, skips, levels, sources, labellers, times
    assert copy.labels() == original.labels()
    assert copy.get_meta("rating_scale") == SCALE
    for query in range(1, 13):
        was, now = original.get_pair_record(query), copy.get_pair_record(query)
        assert (now.kind, now.left_segment, now.right_segment) == (
            was.kind,
            was.left_segment,
            was.right_segment,
        )
    assert [original.get_pair_record(q).kind for q in (6, 7, 12)] == ["pair", "rating", "rating"]
    assert [(r.grade, r.segment.start_step) for r in copy.rated()] == [(3, 0), (0, 14), (2, 21)]
    assert copy.counts().labelled == original.counts().labelled == 10


def test_ratings_parquet_references_clips_like_the_labels_and_reads_as_training_data(
    tmp_path: Path,
) -> None:
    _rated_store(tmp_path / "run")
    export_run(tmp_path / "run", tmp_path / "d")
    table = pq.read_table(tmp_path / "d" / "ratings.parquet")
    assert str(table.schema.field("grade").type) == "int64"
    rows = table.to_pylist()
    assert [r["grade"] for r in rows] == [3, None, 0, 2, None]
    assert [r["labeller"] for r in rows] == [None, None, None, "ann0", "ann1"]
    assert [r["response_ms"] for r in rows][3:] == [900, 901]
    segments = pq.read_table(tmp_path / "d" / "segments.parquet").to_pylist()
    by_episode = {(s["episode_id"], s["start"], s["length"]): s for s in segments}
    # The clip a rating names by (episode, start, length) is the clip that was graded.
    starts = [by_episode[(r["episode"], r["start"], r["length"])]["start_step"] for r in rows]
    assert starts == [0, 7, 14, 21, 28]
    rated = read_ratings(tmp_path / "d")
    original = LabelStore(tmp_path / "run" / "labels.sqlite").rated()
    assert [(r.grade, r.levels) for r in rated] == [(r.grade, r.levels) for r in original]
    for a, b in zip(rated, original, strict=True):
        assert np.array_equal(a.segment.obs, b.segment.obs)
        assert np.array_equal(a.segment.qvel, b.segment.qvel)


def test_a_schema_2_dataset_reads_as_having_no_ratings(tmp_path: Path) -> None:
    _physics_store(tmp_path / "run")
    export_run(tmp_path / "run", tmp_path / "d")
    (tmp_path / "d" / "ratings.parquet").unlink()
    pairs = pq.read_table(tmp_path / "d" / "pairs.parquet").drop_columns(["kind"])
    pq.write_table(pairs, tmp_path / "d" / "pairs.parquet")
    info = json.loads((tmp_path / "d" / "dataset.json").read_text())
    del info["rating_scale"]
    (tmp_path / "d" / "dataset.json").write_text(json.dumps(info | {"schema_version": 2}))
    assert read_ratings(tmp_path / "d") == []
    counts = import_dataset(tmp_path / "d", tmp_path / "copy")
    copy = LabelStore(tmp_path / "copy" / "labels.sqlite")
    assert counts.ratings == 0 and copy.ratings() == []
    assert {copy.get_pair_record(q).kind for q in range(1, 7)} == {"pair"}
    assert copy.labels() == LabelStore(tmp_path / "run" / "labels.sqlite").labels()


def _graded_store(path: Path, clips: int, levels: int = 4, seed: int = 5) -> None:
    """Random 10-step clips whose true reward is the first observation coordinate, graded by
    the quantile of their true return (an ideal teacher on a ``levels`` scale)."""
    rng = np.random.default_rng(seed)
    made = [first_coordinate_segment(rng) for _ in range(clips)]
    returns = np.array([s.true_return for s in made])
    edges = np.quantile(returns, np.linspace(0, 1, levels + 1)[1:-1])
    grades = [int(g) for g in np.searchsorted(edges, returns)]
    LabelStore(path / "labels.sqlite").add_rated_clips(made, grades, levels, "synthetic")


def test_a_reward_fitted_offline_from_a_datasets_ratings_orders_held_out_clips(
    tmp_path: Path,
) -> None:
    """Data seeds 5-9, fit seeds 1-5 (torch 2.13.0): grade order 0.96-1.00, Pearson 0.90-0.97."""
    _graded_store(tmp_path / "run", clips=300)
    export_run(tmp_path / "run", tmp_path / "d")
    ratings = read_ratings(tmp_path / "d")
    assert len(ratings) == 300 and read_preferences(tmp_path / "d") == []
    _, result = fit_offline([], RewardConfig(), test_fraction=0.2, seed=1, ratings=ratings)
    assert (result.train_ratings, result.test_ratings, result.train_labels) == (240, 60, 0)
    assert result.test_rating_accuracy >= 0.85 and result.test_pearson >= 0.8, result


def test_cli_reward_fit_trains_on_pairs_and_ratings_together(tmp_path: Path, capsys) -> None:
    _labelled_store(tmp_path / "run", pairs=40)
    _graded_store(tmp_path / "run", clips=20)
    export_run(tmp_path / "run", tmp_path / "d")
    main(["reward", "fit", str(tmp_path / "d"), "--out", str(tmp_path / "r.pt")])
    out = capsys.readouterr().out
    assert "trained on 32 labels and 16 ratings" in out and "on 4 ratings" in out
    state = torch.load(tmp_path / "r.pt", weights_only=True)
    assert RewardLearner.from_state_dict(state).fitted_on == 48
    assert state["fit"]["train_ratings"] == 16
    main(["reward", "fit", str(tmp_path / "d"), "--out", str(tmp_path / "s.pt"), "--lazy"])
    assert "ratings were not used" in capsys.readouterr().out


def test_cli_reward_fit_prints_only_what_it_measured(tmp_path: Path, capsys) -> None:
    """No ratings: no grade order (it was never measured, so not "nan"); ratings only: no
    pairwise accuracy."""
    _labelled_store(tmp_path / "pairs", pairs=40)
    export_run(tmp_path / "pairs", tmp_path / "p")
    main(["reward", "fit", str(tmp_path / "p"), "--out", str(tmp_path / "p.pt")])
    out = capsys.readouterr().out
    assert "nan" not in out and "grade order" not in out and "no ratings" in out, out
    assert "trained on 32 labels;" in out and "held-out accuracy" in out and " r=" in out
    _graded_store(tmp_path / "graded", clips=20)
    export_run(tmp_path / "graded", tmp_path / "g")
    main(["reward", "fit", str(tmp_path / "g"), "--out", str(tmp_path / "g.pt")])
    out = capsys.readouterr().out
    assert "nan" not in out and "accuracy" not in out and "no ratings" not in out, out
    assert "trained on 16 ratings;" in out and "grade order" in out and "on 4 ratings" in out


def test_a_run_whose_store_predates_ratings_exports_without_migrating(tmp_path: Path) -> None:
    import sqlite3

    _physics_store(tmp_path / "run")
    con = sqlite3.connect(tmp_path / "run" / "labels.sqlite")
    for statement in ("DROP VIEW answered", "DROP TABLE ratings",
                      "ALTER TABLE pairs DROP COLUMN kind", "PRAGMA user_version = 1"):  # fmt: skip
        con.execute(statement)
    con.commit()
    con.close()
    store_bytes = (tmp_path / "run" / "labels.sqlite").read_bytes()
    counts = export_run(tmp_path / "run", tmp_path / "d")
    assert (tmp_path / "run" / "labels.sqlite").read_bytes() == store_bytes  # read, not migrated
    assert (counts.labels, counts.ratings) == (5, 0)
    kinds = pq.read_table(tmp_path / "d" / "pairs.parquet").column("kind").to_pylist()
    assert kinds == ["pair"] * 6
    import_dataset(tmp_path / "d", tmp_path / "copy")
    export_run(tmp_path / "copy", tmp_path / "b")
    for name in ("pairs", "labels", "ratings"):
        assert (tmp_path / "d" / f"{name}.parquet").read_bytes() == (
            tmp_path / "b" / f"{name}.parquet"
        ).read_bytes()
