"""Bad command-line input: exit code 2 and one line on stderr, never a traceback; --resume."""

from __future__ import annotations

import dataclasses
import importlib.util
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from rlhf.cli import parse
from rlhf.config import Config, QueryConfig
from rlhf.run.run_dir import create_run_dir
from rlhf.store import LATEST_VERSION


def _rlhf(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "rlhf", *args], capture_output=True, text=True, cwd=cwd, timeout=120
    )


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["train", "--env-id", "HalfCheetah-v0"], "unknown environment id 'HalfCheetah-v0'"),
        (["train", "--env-id", "CartPole-v1"], "continuous"),
        (["train", "--total-timesteps", "abc"], "--total-timesteps"),
        (["train", "--no-such-flag", "1"], "--no-such-flag"),
        (["train", "--gamma", "1.5"], "--gamma must be in [0, 1]"),
        (["train", "--num-envs", "0"], "--num-envs must be >= 1"),
        (["train", "--end-margin", "nan"], "--end-margin must be a finite number"),
        (["train", "--sac.end-margin", "inf"], "--sac.end-margin must be a finite number"),
        (["train", "--reward", "magic"], "--reward"),
        (["serve", "--run", "does/not/exist"], "not a run directory"),
        (["fly"], "unknown command 'fly'; choose one of: train, serve"),
        (
            ["train", "--total-label", "3"],
            "rlhf: error: unrecognized flag --total-label; did you mean --query.total-labels?",
        ),
        (["train", "--gama=0.5"], "unrecognized flag --gama; did you mean --gamma?"),
        (["serve", "--run", "x", "--prot", "80"], "unrecognized flag --prot; did you mean --port?"),
        (["train", "--query.total-labels", "-1"], "--query.total-labels must be >= 0"),
        (["train", "--query.segment-length", "0"], "--query.segment-length must be >= 1"),
        (["train", "--video.height", "8"], "--video.height must be >= 16"),
        (["train", "--run-name", "../outside"], "--run-name must be a plain directory name"),
        (["train", "--run-name", "a/b"], "--run-name must be a plain directory name"),
        (["train", "--run-name", "/abs"], "--run-name must be a plain directory name"),
        (["train", "--run-name", "a\\b"], "--run-name must be a plain directory name"),
        (["train", "--resume", "runs/missing"], "--resume runs/missing: no such run directory"),
    ],
)
def test_bad_input_is_one_line_and_exit_code_2(
    args: list[str], needle: str, tmp_path: Path
) -> None:
    result = _rlhf(*args, cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip() and "WARNING" not in line]
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("rlhf: error:")
    assert needle in lines[0]
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "runs").exists()


def test_a_goal_env_without_gymnasium_robotics_says_how_to_install_the_goals_extra(
    tmp_path: Path,
) -> None:
    """The real path: gymnasium-robotics is not installed, so its ids are unknown to gymnasium;
    the refusal names the extra and the project's own setup script, not "unknown id"."""
    if importlib.util.find_spec("gymnasium_robotics") is not None:
        pytest.skip(
            "gymnasium-robotics is installed (tests/envs/test_tasks.py simulates its absence)"
        )
    result = _rlhf("train", "--env-id", "PointMaze_UMaze-v3", cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip() and "WARNING" not in line]
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("rlhf: error: PointMaze_UMaze-v3 needs the goals extra")
    assert lines[0].endswith("scripts/setup.sh goals")  # run from outside the checkout
    assert "unknown environment id" not in lines[0] and "pip install" not in lines[0]


def test_help_lists_the_common_flags(tmp_path: Path) -> None:
    result = _rlhf("train", "--help", cwd=tmp_path)
    assert result.returncode == 0
    for flag in (
        "--env-id",
        "--total-timesteps",
        "--seed",
        "--run-name",
        "--runs-dir",
        "--reward",
        "--device",
        "--num-envs",
        "--learning-rate",
        "--num-steps",
    ):
        assert flag in result.stdout, flag


def test_help_leads_with_the_flags_a_person_needs_first(tmp_path: Path) -> None:
    """rlhf train --help opens with the first flags to use, the expert ones below them.

    tyro prints the top-level settings in one box before any section, so a section's flag
    (--query.total-labels, --port) cannot join them without a new name: the description above
    the boxes names it, and its section is the first box after them. Measured at 80 columns:
    every flag below is named by line 8, --resume's entry is on line 29, the query box starts on
    line 105 (of 478); the bars leave a little room.
    """
    result = subprocess.run(
        [sys.executable, "-m", "rlhf", "train", "--help"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
        env={**os.environ, "COLUMNS": "80"},
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()

    def first(needle: str) -> int:
        """1-based number of the first line holding ``needle``."""
        return next(i for i, line in enumerate(lines, 1) if needle in line)

    def entry(flag: str) -> int:
        """1-based line of the flag's own entry in a box."""
        return first(f"│ {flag} ")

    first_flags = ["--env-id", "--total-timesteps", "--query.total-labels", "--feedback"]
    first_flags += ["--task", "--host", "--port", "--run-name", "--runs-dir", "--seed", "--resume"]
    for flag in first_flags:
        assert first(flag) <= 12, (flag, first(flag))
    top = ["--env-id", "--total-timesteps", "--feedback", "--task", "--seed", "--run-name"]
    top += ["--runs-dir", "--resume"]
    for flag in top:  # their entries, in this order, at the top of the options box
        assert entry(flag) <= 40, (flag, entry(flag))
    assert [entry(f) for f in top] == sorted(entry(f) for f in top)
    assert entry("--resume") < entry("--terminations") < entry("--learning-rate")
    # The first section box after the options is the query box, led by the label budget; then
    # the labelling page's (--host, --port).
    boxes = [line for line in lines if line.startswith("╭─ ")]
    assert [box.split()[1] for box in boxes[:3]] == ["options", "query", "web"], boxes
    query_box = first("╭─ query options")
    assert next(line for line in lines[query_box:] if line.startswith("│ --")).startswith(
        "│ --query.total-labels "
    )
    assert entry("--query.total-labels") <= 125
    assert entry("--query.total-labels") < entry("--host") < entry("--port") < entry("--gamma")


def _stored_run(tmp_path: Path) -> Config:
    cfg = Config(
        runs_dir=str(tmp_path / "runs"),
        run_name="r1",
        total_timesteps=1000,
        query=QueryConfig(total_labels=50),
        progress=False,
    )
    create_run_dir(cfg)
    return cfg


def _refused(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(SystemExit) as info:
        parse(argv)
    assert info.value.code == 2
    [line] = capsys.readouterr().err.splitlines()
    return line


def test_resume_without_flags_is_exactly_the_stored_run(tmp_path: Path) -> None:
    stored = _stored_run(tmp_path)
    resume = str(tmp_path / "runs" / "r1")
    assert parse(["train", "--resume", resume]) == dataclasses.replace(stored, resume=resume)


def test_resume_may_raise_budgets_and_change_session_flags(tmp_path: Path) -> None:
    _stored_run(tmp_path)
    cfg = parse(
        ["train", "--resume", str(tmp_path / "runs" / "r1"), "--total-timesteps", "5000",
         "--query.total-labels", "80", "--port", "8123", "--progress", "--device", "cpu",
         "--checkpoint-minutes", "1", "--run-name", "r1"]
    )  # fmt: skip
    assert isinstance(cfg, Config)
    assert (cfg.total_timesteps, cfg.query.total_labels) == (5000, 80)
    assert (cfg.web.port, cfg.progress, cfg.device, cfg.checkpoint_minutes) == (
        8123,
        True,
        "cpu",
        1,
    )
    assert cfg.ppo == Config().ppo and cfg.run_name == "r1"


def test_resume_may_give_more_minutes_or_lift_the_limit_never_fewer(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    create_run_dir(Config(runs_dir=str(tmp_path), run_name="r", max_minutes=30, progress=False))
    resume = ["train", "--resume", str(tmp_path / "r"), "--max-minutes"]
    for given, minutes in (("60", 60.0), ("0", 0.0), ("30", 30.0)):
        cfg = parse([*resume, given])
        assert isinstance(cfg, Config) and cfg.max_minutes == minutes
    refused = _refused([*resume, "10"], capsys)
    assert refused.endswith(
        "--max-minutes cannot be lowered on --resume (the run was started with 30.0)"
    )


@pytest.mark.parametrize(
    ("flags", "line"),
    [
        (["--gamma", "0.5"], "--gamma cannot change on --resume (the run was started with 0.99)"),
        (
            ["--total-timesteps", "999"],
            "--total-timesteps cannot be lowered on --resume (the run was started with 1000)",
        ),
        (
            ["--max-minutes", "30"],
            "--max-minutes cannot be lowered on --resume (the run was started with 0.0, no limit)",
        ),
        (
            ["--query.total-labels", "10"],
            "--query.total-labels cannot be lowered on --resume (the run was started with 50)",
        ),
        (
            ["--reward-model.hidden-sizes", "8"],
            "--reward-model.hidden-sizes cannot change on --resume (the run was started with 64 64)",
        ),
        (["--env-id", "Hopper-v5"], "--env-id cannot change on --resume"),
        (["--run-name", "other"], "--run-name must be 'r1' (the resumed run) or absent"),
        (["--runs-dir", "elsewhere"], "--runs-dir must be"),
    ],
)
def test_resume_refuses_flags_that_change_the_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flags: list[str], line: str
) -> None:
    _stored_run(tmp_path)
    refused = _refused(["train", "--resume", str(tmp_path / "runs" / "r1"), *flags], capsys)
    assert refused.startswith(f"rlhf: error: {line}")


def test_resume_of_a_directory_without_config_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "empty").mkdir()
    line = _refused(["train", "--resume", str(tmp_path / "empty")], capsys)
    assert line.endswith("no config.json in it (is it a run directory?)")


def test_a_store_from_a_newer_rlhf_is_one_line(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    con = sqlite3.connect(run / "labels.sqlite")
    con.execute("PRAGMA user_version = 7")
    con.execute("CREATE TABLE future(x)")
    con.commit()
    con.close()
    result = _rlhf("serve", "--run", str(run), cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip() == (
        f"rlhf: error: {run / 'labels.sqlite'} was written by a newer rlhf (store schema 7;"
        f" this rlhf reads up to {LATEST_VERSION}): upgrade rlhf"
    )


def test_help_shows_each_field_docstring_as_one_paragraph() -> None:
    """Field docstrings span several indented lines; --help must not keep those breaks."""
    import tyro._docstrings

    import rlhf.cli  # noqa: F401  (applies the fix)
    from rlhf.config import Config, TeacherConfig

    for cls, name in ((Config, "resume"), (TeacherConfig, "gamma")):
        text = tyro._docstrings.get_field_docstring(cls, name, ())
        assert text and "\n" not in text, text
