"""Store schema versions: old stores open unchanged, the migration runner is ordered and atomic."""

from __future__ import annotations

import io
import json
import sqlite3
import threading
from pathlib import Path

import numpy as np
import pytest

from rlhf.config import ConfigError
from rlhf.core.types import Answer
from rlhf.store import LATEST_VERSION, LabelStore, StoreVersionError
from rlhf.store.schema import Migration, migrate, user_version

# The schema exactly as it shipped before stores carried a version (rlhf/store.py at eb97b84).
# Frozen here on purpose: it is what stores already on disk contain, whatever the code says now.
OLD_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS segments (
    id INTEGER PRIMARY KEY,
    env_id TEXT NOT NULL,
    start_step INTEGER NOT NULL,
    length INTEGER NOT NULL,
    true_return REAL NOT NULL,
    arrays BLOB NOT NULL
);
CREATE TABLE IF NOT EXISTS pairs (
    id INTEGER PRIMARY KEY,
    left_segment INTEGER NOT NULL REFERENCES segments(id),
    right_segment INTEGER NOT NULL REFERENCES segments(id),
    swapped INTEGER NOT NULL DEFAULT 0,
    iteration INTEGER NOT NULL DEFAULT 0,
    created_at REAL NOT NULL,
    video_status TEXT NOT NULL DEFAULT 'pending',
    video_path TEXT,
    video_error TEXT,
    video_updated_at REAL
);
CREATE INDEX IF NOT EXISTS pairs_video_status ON pairs(video_status);
CREATE TABLE IF NOT EXISTS labels (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    pair_id INTEGER NOT NULL UNIQUE REFERENCES pairs(id),
    answer TEXT NOT NULL,
    source TEXT NOT NULL,
    labeller TEXT,
    response_ms INTEGER,
    created_at REAL NOT NULL
);
"""

TABLES = ("meta", "segments", "pairs", "labels", "sqlite_sequence")


def _old_pack(rng: np.random.Generator, length: int) -> tuple[bytes, np.ndarray]:
    """A segment blob in the old code's format (np.savez of the five arrays); and its obs."""
    obs = rng.normal(size=(length, 3)).astype(np.float32)
    buf = io.BytesIO()
    np.savez(
        buf,
        obs=obs,
        actions=rng.uniform(-1, 1, size=(length, 2)).astype(np.float32),
        true_rewards=rng.normal(size=length).astype(np.float32),
        qpos=rng.normal(size=(length, 2)),
        qvel=rng.normal(size=(length, 2)),
    )
    return buf.getvalue(), obs


def _old_store(path: Path, rng: np.random.Generator) -> dict[int, np.ndarray]:
    """A store as the pre-versioning code left it (user_version 0); returns obs by segment id."""
    con = sqlite3.connect(path, isolation_level=None)
    con.execute("PRAGMA journal_mode=WAL")
    con.executescript(OLD_SCHEMA)
    obs: dict[int, np.ndarray] = {}
    for seg_id in range(1, 11):
        blob, obs[seg_id] = _old_pack(rng, 4)
        con.execute(
            "INSERT INTO segments VALUES(?, 'HalfCheetah-v5', ?, 4, ?, ?)",
            (seg_id, 10 * seg_id, float(seg_id), blob),
        )
    statuses = ["ready", "ready", "ready", "ready", "pending"]
    for pair_id, status in enumerate(statuses, start=1):
        con.execute(
            "INSERT INTO pairs(id, left_segment, right_segment, swapped, iteration, created_at,"
            " video_status, video_path) VALUES(?, ?, ?, ?, 2, 1700000000.5, ?, ?)",
            (pair_id, 2 * pair_id - 1, 2 * pair_id, pair_id % 2, status, f"videos/{pair_id}.mp4"),
        )
    for pair_id, answer in zip((1, 2, 3, 4), ("left", "right", "equal", "skip"), strict=True):
        con.execute(
            "INSERT INTO labels(pair_id, answer, source, labeller, response_ms, created_at)"
            " VALUES(?, ?, 'human', 'ann', ?, 1700000100.25)",
            (pair_id, answer, 1000 + pair_id),
        )
    con.execute("INSERT INTO meta VALUES('trainer_status', ?)", (json.dumps({"phase": "ppo"}),))
    con.close()
    return obs


def _dump(path: Path) -> dict[str, list[tuple]]:
    con = sqlite3.connect(path)
    try:
        dump = {t: con.execute(f"SELECT * FROM {t} ORDER BY rowid").fetchall() for t in TABLES}
        dump["schema"] = con.execute("SELECT type, name, sql FROM sqlite_master").fetchall()
        return dump
    finally:
        con.close()


def test_migrations_open_the_store_that_shipped_before_versions_unchanged(
    tmp_path: Path, rng: np.random.Generator
) -> None:
    path = tmp_path / "labels.sqlite"
    obs = _old_store(path, rng)
    before = _dump(path)
    assert len(before["labels"]) == 4 and len(before["segments"]) == 10

    store = LabelStore(path)
    assert store.schema_version == LATEST_VERSION
    assert [(lb.pair_id, lb.answer, lb.labeller, lb.response_ms) for lb in store.labels()] == [
        (1, Answer.LEFT, "ann", 1001),
        (2, Answer.RIGHT, "ann", 1002),
        (3, Answer.EQUAL, "ann", 1003),
        (4, Answer.SKIP, "ann", 1004),
    ]
    prefs = store.preferences()
    assert [p.mu for p in prefs] == [Answer.LEFT.mu, Answer.RIGHT.mu, Answer.EQUAL.mu]
    np.testing.assert_array_equal(prefs[1].pair.left.obs, obs[3])
    np.testing.assert_array_equal(prefs[1].pair.right.obs, obs[4])
    counts = store.counts()
    assert (counts.pairs, counts.labelled, counts.equal, counts.skipped) == (5, 4, 1, 1)
    assert (counts.pending_video, counts.ready_unlabelled) == (1, 0)
    assert store.get_meta("trainer_status") == {"phase": "ppo"}
    assert store.get_pair_record(1).swapped is True
    store.close()

    after = _dump(path)
    # Every row as it was; migration 2 gives each pair the kind 'pair' (and adds ratings).
    assert after["pairs"] == [(*row, "pair") for row in before["pairs"]]
    assert {t: after[t] for t in TABLES if t != "pairs"} == {
        t: before[t] for t in TABLES if t != "pairs"
    }
    assert sqlite3.connect(path).execute("SELECT COUNT(*) FROM ratings").fetchone() == (0,)
    con = sqlite3.connect(path)
    assert user_version(con) == LATEST_VERSION
    con.close()


def test_a_new_file_gets_the_latest_schema_which_v1_matches_the_shipped_one(
    tmp_path: Path,
) -> None:
    LabelStore(tmp_path / "new.sqlite").close()
    con = sqlite3.connect(tmp_path / "old.sqlite")
    con.executescript(OLD_SCHEMA)
    con.close()
    v1 = _dump(tmp_path / "old.sqlite")
    LabelStore(tmp_path / "old.sqlite").close()  # the shipped schema, migrated to the latest
    new, old = _dump(tmp_path / "new.sqlite"), _dump(tmp_path / "old.sqlite")
    assert LATEST_VERSION == 3  # a new migration must replace this comparison with its own
    # A fresh file and the shipped one migrated agree; the migrations only add to v1.
    assert sorted(new["schema"]) == sorted(old["schema"])
    added = {name for _, name, _ in new["schema"]} - {name for _, name, _ in v1["schema"]}
    assert added == {
        "ratings",
        "answered",
        "opinions",
        "sqlite_autoindex_opinions_1",
        "sqlite_autoindex_ratings_1",
        "policy_clips",
        "curve",
    }
    con = sqlite3.connect(tmp_path / "new.sqlite")
    assert user_version(con) == LATEST_VERSION
    con.close()


def _logging(k: int) -> Migration:
    def step(con: sqlite3.Connection) -> None:
        con.execute("CREATE TABLE IF NOT EXISTS log(k INTEGER)")
        con.execute("INSERT INTO log VALUES(?)", (k,))

    return step


def _log(con: sqlite3.Connection) -> list[int]:
    return [k for (k,) in con.execute("SELECT k FROM log ORDER BY rowid")]


def _failing(con: sqlite3.Connection) -> None:
    con.execute("INSERT INTO log VALUES(3)")
    con.execute("CREATE TABLE half_done(x)")
    raise RuntimeError("migration 3 broke")


def test_runner_applies_migrations_in_order_each_once(tmp_path: Path) -> None:
    con = sqlite3.connect(tmp_path / "s.sqlite", isolation_level=None)
    assert migrate(con, tmp_path, [_logging(1), _logging(2)]) == 2
    assert _log(con) == [1, 2] and user_version(con) == 2
    assert migrate(con, tmp_path, [_logging(1), _logging(2)]) == 2  # reopen: nothing re-runs
    assert migrate(con, tmp_path, [_logging(1), _logging(2), _logging(3)]) == 3  # only the new one
    assert _log(con) == [1, 2, 3] and user_version(con) == 3
    con.close()


def test_a_failing_migration_leaves_the_previous_version_intact(tmp_path: Path) -> None:
    con = sqlite3.connect(tmp_path / "s.sqlite", isolation_level=None)
    with pytest.raises(RuntimeError, match="migration 3 broke"):
        migrate(con, tmp_path, [_logging(1), _logging(2), _failing])
    assert user_version(con) == 2
    assert _log(con) == [1, 2]
    tables = {name for (name,) in con.execute("SELECT name FROM sqlite_master")}
    assert "half_done" not in tables
    assert not con.in_transaction
    assert migrate(con, tmp_path, [_logging(1), _logging(2), _logging(3)]) == 3
    assert _log(con) == [1, 2, 3]
    con.close()


def test_concurrent_openers_run_each_migration_once(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite"
    migrations = [_logging(k) for k in range(1, 6)]
    barrier = threading.Barrier(6)
    errors: list[BaseException] = []

    def opener() -> None:
        con = sqlite3.connect(path, timeout=30, isolation_level=None)
        barrier.wait()
        try:
            migrate(con, path, migrations)
        except BaseException as exc:  # reported below; a thread's exception is otherwise lost
            errors.append(exc)
        con.close()

    threads = [threading.Thread(target=opener) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert errors == []
    con = sqlite3.connect(path)
    assert _log(con) == [1, 2, 3, 4, 5]
    con.close()


def test_a_store_from_a_newer_rlhf_is_refused_untouched(tmp_path: Path) -> None:
    path = tmp_path / "labels.sqlite"
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE future(x)")
    con.execute("PRAGMA user_version = 7")
    con.commit()
    con.close()
    before = path.read_bytes()

    with pytest.raises(StoreVersionError) as info:
        LabelStore(path)
    assert str(info.value) == (
        f"{path} was written by a newer rlhf (store schema 7; this rlhf reads up to"
        f" {LATEST_VERSION}): upgrade rlhf"
    )
    assert isinstance(info.value, ConfigError)  # so the command line prints it as one line
    assert path.read_bytes() == before
    con = sqlite3.connect(path)
    assert {name for (name,) in con.execute("SELECT name FROM sqlite_master")} == {"future"}
    con.close()
