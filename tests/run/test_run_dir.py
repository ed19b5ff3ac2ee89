"""Run directories: names stay inside runs_dir, config.json is rewritten atomically and read back."""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path

import pytest

from rlhf.config import Config, ConfigError, WebConfig
from rlhf.run.run_dir import RunDir, create_run_dir, read_config, trainer_lock, write_config


@pytest.mark.parametrize("name", ["..", "../escape", "a/b", "a\\b", "/tmp/abs", "C:evil", ""])
def test_create_run_dir_refuses_names_that_leave_runs_dir(tmp_path: Path, name: str) -> None:
    runs = tmp_path / "deep" / "runs"
    with pytest.raises(ConfigError, match="--run-name must be a plain directory name"):
        create_run_dir(Config(runs_dir=str(runs), run_name=name))
    assert not (tmp_path / "deep").exists()  # nothing made, inside or outside


def test_default_run_name_of_a_namespaced_env_is_one_directory(tmp_path: Path) -> None:
    run = create_run_dir(Config(runs_dir=str(tmp_path), env_id="ns/Thing-v0"))
    assert run.root.parent == tmp_path and run.name.startswith("ns-Thing-v0__")


def test_write_config_replaces_the_file_and_reads_back(tmp_path: Path) -> None:
    cfg = Config(runs_dir=str(tmp_path), run_name="r", total_timesteps=100)
    run = create_run_dir(cfg)
    assert read_config(run.root) == cfg
    raised = dataclasses.replace(cfg, total_timesteps=500)
    write_config(run, raised)
    assert read_config(run.root) == raised
    assert sorted(p.name for p in run.root.iterdir() if p.is_file()) == ["config.json"]
    assert (run.config.stat().st_mode & 0o777) == 0o644


def test_write_config_that_fails_leaves_the_old_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cfg = Config(runs_dir=str(tmp_path), run_name="r")
    run = create_run_dir(cfg)
    before = run.config.read_bytes()

    def broken_replace(src: str, dst: str) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", broken_replace)
    with pytest.raises(OSError, match="disk full"):
        write_config(run, dataclasses.replace(cfg, total_timesteps=5))
    assert run.config.read_bytes() == before
    assert sorted(p.name for p in run.root.iterdir() if p.is_file()) == ["config.json"]


def test_write_config_syncs_the_directory_entry(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The rename is durable only once the directory is synced: a power cut would otherwise
    # leave the old config.json (or none, on a new run) after the trainer moved on.
    run = create_run_dir(Config(runs_dir=str(tmp_path), run_name="r"))
    synced: list[str] = []
    real_fsync = os.fsync

    def spy(fd: int) -> None:
        synced.append(os.readlink(f"/proc/self/fd/{fd}"))
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", spy)
    write_config(run, Config(runs_dir=str(tmp_path), run_name="r", seed=2))
    assert str(run.root.resolve()) in synced


def test_the_web_token_is_not_kept_in_the_run_directory(tmp_path: Path) -> None:
    # config.json is world-readable and travels with the run (exports, sweeps, bug reports):
    # a token written there would open the labelling page to whoever reads it.
    secret = "s3cret-token-value"
    cfg = Config(runs_dir=str(tmp_path), run_name="r", web=WebConfig(token=secret))
    run = create_run_dir(cfg)
    write_config(run, cfg)
    assert secret not in run.config.read_text()
    assert read_config(run.root) == dataclasses.replace(cfg, web=WebConfig(token=None))


def test_taking_the_trainer_lock_removes_what_a_killed_writer_left(tmp_path: Path) -> None:
    run = create_run_dir(Config(runs_dir=str(tmp_path), run_name="r"))
    run.checkpoints.mkdir(parents=True, exist_ok=True)
    orphans = [run.checkpoints / ".last.pt.k2j3.tmp", run.root / ".config.json.x8.tmp.json"]
    kept = [run.checkpoints / "last.pt", run.root / "notes.tmp", run.root / ".hidden"]
    for path in orphans + kept:
        path.write_bytes(b"x")
    with trainer_lock(run):
        assert [p.exists() for p in orphans] == [False, False]
        assert all(p.exists() for p in kept)
        # A second trainer is refused before it can touch the first one's files in flight.
        orphans[0].write_bytes(b"in flight")
        with (
            pytest.raises(ConfigError, match="being trained by another process"),
            trainer_lock(run),
        ):
            pass
        assert orphans[0].exists()


@pytest.mark.parametrize(
    ("content", "needle"),
    [
        (None, "no config.json in it"),
        ("{not json", "config.json is not valid JSON"),
        (json.dumps({"seed": 1, "colour": "red"}), "config.json: unknown settings colour"),
        (json.dumps({"seed": "one"}), "config.json: seed has a value"),
    ],
)
def test_read_config_errors_are_one_line(tmp_path: Path, content: str | None, needle: str) -> None:
    run = RunDir(tmp_path / "r")
    run.root.mkdir()
    if content is not None:
        run.config.write_text(content)
    with pytest.raises(ConfigError) as info:
        read_config(run.root)
    assert needle in str(info.value) and "\n" not in str(info.value)
    with pytest.raises(ConfigError, match="no such run directory"):
        read_config(tmp_path / "missing")
