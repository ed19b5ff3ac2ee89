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


_FULL = Config().to_dict()
"""A complete config.json as written before it carried a schema and a checksum."""


@pytest.mark.parametrize(
    ("content", "needle"),
    [
        (None, "no config.json in it"),
        ("{not json", "config.json is not valid JSON"),
        (json.dumps({**_FULL, "colour": "red"}), "config.json: unknown settings colour"),
        (json.dumps({**_FULL, "seed": "one"}), "config.json: seed has a value"),
        # Damaged or incomplete: refused, never filled from the defaults (issue 32).
        ("{}", "config.json is incomplete: it lacks env_id (and 6 more settings)"),
        ("[]", "config.json is not a JSON object but list"),
        (json.dumps({"seed": 1, "env_id": "Hopper-v5"}), "config.json is incomplete: it lacks"),
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
    if content is not None:  # the way out: the labels are kept, the run name is not reused
        assert str(info.value).endswith(f"--labels-from {run.root} --run-name NEW")
    with pytest.raises(ConfigError, match="no such run directory"):
        read_config(tmp_path / "missing")


def _signed(tmp_path: Path) -> RunDir:
    cfg = Config(env_id="Hopper-v5", feedback="synthetic", total_timesteps=60_000)
    run = RunDir(tmp_path / "r")
    run.root.mkdir()
    write_config(run, cfg)
    return run


def test_config_json_carries_a_schema_and_a_checksum_that_a_damaged_file_fails(
    tmp_path: Path,
) -> None:
    run = _signed(tmp_path)
    data = json.loads(run.config.read_text())
    assert data["config_schema"] == 1 and len(data["sha256"]) == 64
    assert read_config(run.root).total_timesteps == 60_000  # a whole file reads back
    for change, needle in (
        ({"total_timesteps": 1_000_000}, "does not match its sha256"),  # one value damaged
        ({"config_schema": 99}, "config_schema 99; this rlhf reads up to 1: upgrade rlhf"),
    ):
        run.config.write_text(json.dumps({**data, **change}))
        with pytest.raises(ConfigError, match=needle):
            read_config(run.root)
    # Without its checksum (an edit that dropped it) the file must still name every setting.
    unsigned = {k: v for k, v in data.items() if k != "sha256"}
    del unsigned["query"]["total_labels"]
    run.config.write_text(json.dumps(unsigned))
    with pytest.raises(ConfigError, match=r"is incomplete: it lacks query\.total_labels;"):
        read_config(run.root)


def test_a_complete_config_json_from_before_the_checksum_still_resumes(tmp_path: Path) -> None:
    run = RunDir(tmp_path / "r")
    run.root.mkdir()
    run.config.write_text(json.dumps({**_FULL, "seed": 7}))
    assert read_config(run.root).seed == 7


SCHEMA_1 = Path(__file__).with_name("config_schema_1.json")
"""``config.json`` as the first rlhf that signed it wrote it (a2ae414, config_schema 1): an Ant
run of 300k steps, seed 101, with its preset. Thirteen settings have been added since."""


def test_a_config_json_of_the_first_schema_reads_as_its_run_ran(tmp_path: Path) -> None:
    """An upgraded rlhf resumes, records and reports the runs an older one left, with each
    setting added since at the value that run had (rlhf/config/history.py). A setting added
    without such a value fails here, as it left every older run unreadable once (ppo.min_std)."""
    run = RunDir(tmp_path / "r")
    run.root.mkdir()
    run.config.write_bytes(SCHEMA_1.read_bytes())
    stored = read_config(run.root)
    assert (stored.env_id, stored.seed, stored.total_timesteps) == ("Ant-v5", 101, 300_000)
    assert (stored.ppo.init_log_std, stored.query.replay_share) == (-1.0, 0.3)  # its preset
    assert stored.ppo.min_std == 0.0  # no floor on the noise
    assert stored.reward_model.sees == "observation"  # Ant's reward read every entry then
    assert Config(env_id="Ant-v5").reward_model.sees == "motion"  # ... and reads less today
    assert (stored.reward_model.explore_bonus, stored.reward_model.self_predict) == (0.0, 0.0)
    assert (stored.query.ask_when_new, stored.sac.recent_share) == (None, 0.0)
    assert stored.video.ready_ahead_max == stored.video.ready_ahead  # a fixed number then
    # What schema 1 named is still required: without its checksum, a file that lacks one of
    # those settings was damaged, and it is refused rather than filled.
    data = json.loads(SCHEMA_1.read_text())
    del data["sha256"], data["ppo"]["init_log_std"]
    run.config.write_text(json.dumps(data))
    with pytest.raises(ConfigError, match=r"is incomplete: it lacks ppo\.init_log_std;"):
        read_config(run.root)


def test_resume_with_an_empty_config_json_is_refused_and_leaves_it_alone(tmp_path: Path) -> None:
    """Issue 32: ``{}`` used to resume as a human run of 1,000,000 steps and rewrite the file."""
    import subprocess
    import sys

    run = _signed(tmp_path)
    run.config.write_text("{}")
    result = subprocess.run(
        [sys.executable, "-m", "rlhf", "train", "--resume", str(run.root)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2 and len(lines) == 1, result.stderr
    assert lines[0].startswith(f"rlhf: error: {run.config} is incomplete: it lacks env_id")
    assert "--run-name NEW" in lines[0] and "Traceback" not in result.stderr
    assert run.config.read_text() == "{}"


@pytest.mark.parametrize("feedback", ["synthetic", "human"])
def test_a_run_that_learns_from_an_older_target_catalogue_does_not_resume(
    tmp_path: Path, feedback: str
) -> None:
    """A target's definition changed (catalogue 1 -> 2): a run whose labels or reward came from
    the old one must not continue on the new one; a person's labels stay valid."""
    from rlhf.config import TeacherConfig
    from rlhf.envs.targets import CATALOGUE_VERSION
    from rlhf.run.config_file import config_digest
    from rlhf.run.run_dir import resumed_config

    cfg = Config(
        runs_dir=str(tmp_path),
        run_name="r",
        env_id="Hopper-v5",
        feedback=feedback,
        teacher=TeacherConfig(target="stand"),
    )
    run = create_run_dir(cfg)
    data = json.loads(run.config.read_text())
    assert data["target_catalogue"] == CATALOGUE_VERSION == 2
    stored = read_config(run.root)
    assert resumed_config(run.root, stored, stored) == dataclasses.replace(
        cfg, resume=str(run.root)
    )

    del data["target_catalogue"], data["sha256"]  # as an rlhf before the version wrote it
    run.config.write_text(json.dumps({**data, "sha256": config_digest(data)}))
    stored = read_config(run.root)
    if feedback == "human":  # the target only measured: the labels are a person's
        assert resumed_config(run.root, stored, stored).teacher.target == "stand"
        return
    with pytest.raises(ConfigError) as caught:
        resumed_config(run.root, stored, stored)
    message = str(caught.value)
    assert "--teacher.target stand comes from target catalogue 1" in message
    assert "catalogue 2" in message and "start a new run" in message and "\n" not in message


def test_a_run_without_a_named_target_stores_no_catalogue(tmp_path: Path) -> None:
    run = create_run_dir(Config(runs_dir=str(tmp_path), run_name="r"))
    assert "target_catalogue" not in json.loads(run.config.read_text())
