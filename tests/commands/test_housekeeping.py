"""rlhf runs list|report|clean, and the lock that keeps a second trainer off a running run."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest

from rlhf.cli import main
from rlhf.commands.housekeeping import DAY, CleanRule, clean, scan
from rlhf.config import ConfigError, QueryConfig
from rlhf.run.run_dir import RunDir, is_trainer_running, trainer_lock
from rlhf.run.runner import run
from tests.support.helpers import tiny_config

NOW = time.time()


def _fake_run(
    root: Path, name: str, status: str | None, labels: int, age_days: float, ratings: int = 0
) -> Path:
    """A run directory with every part; its files are ``age_days`` old. ``ratings`` graded
    clips (--feedback-kind ratings) make its store one of schema 2 or later."""
    path = root / name
    for part in ("videos", "checkpoints", "tb"):
        (path / part).mkdir(parents=True)
        (path / part / "blob").write_bytes(b"x" * 1000)
    (path / "config.json").write_text(json.dumps({"env_id": "Hopper-v5"}))
    if status:
        (path / "summary.json").write_text(json.dumps({"status": status, "env_id": "Hopper-v5"}))
    con = sqlite3.connect(path / "labels.sqlite")
    con.execute("CREATE TABLE labels (seq INTEGER PRIMARY KEY, answer TEXT)")
    con.executemany("INSERT INTO labels (answer) VALUES (?)", [("left",)] * labels)
    if ratings:
        con.execute("CREATE TABLE ratings (seq INTEGER PRIMARY KEY, grade INTEGER)")
        grades = [(g % 5 if g % 7 else None,) for g in range(ratings)]  # a few skipped
        con.executemany("INSERT INTO ratings (grade) VALUES (?)", grades)
    con.commit()
    con.close()
    stamp = NOW - age_days * DAY
    for file in [path, *path.rglob("*")]:
        os.utime(file, (stamp, stamp))
    return path


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def runs(tmp_path: Path) -> Path:
    _fake_run(tmp_path, "old", "finished", labels=700, age_days=40)
    _fake_run(tmp_path, "crashed", "crashed", labels=12, age_days=1)
    _fake_run(tmp_path, "fresh", "finished", labels=5, age_days=2)
    _fake_run(tmp_path, "killed", None, labels=30, age_days=3)
    (tmp_path / "not-a-run").mkdir()
    return tmp_path


def test_scan_reads_each_run_without_changing_it(runs: Path) -> None:
    before = {p: p.stat().st_mtime for p in runs.rglob("*")}
    infos = {i.path.name: i for i in scan(runs, now=NOW)}
    assert set(infos) == {"old", "crashed", "fresh", "killed"}
    assert [infos[n].labels for n in ("old", "crashed", "fresh", "killed")] == [700, 12, 5, 30]
    assert infos["killed"].status == "unknown" and infos["crashed"].status == "crashed"
    assert infos["old"].age_days == pytest.approx(40, abs=0.01)
    assert infos["old"].cleanable == 2000 and infos["old"].sizes["tb"] == 1000
    assert {p: p.stat().st_mtime for p in runs.rglob("*")} == before  # read-only, no journal


def test_clean_removes_videos_and_checkpoints_of_old_and_crashed_runs_only(runs: Path) -> None:
    stores = {p: _digest(p) for p in runs.glob("*/labels.sqlite")}
    rule = CleanRule(max_age_days=30)
    chosen = [i for i in scan(runs, now=NOW) if rule.reason(i)]
    assert sorted(i.path.name for i in chosen) == ["crashed", "old"]
    for info in chosen:
        assert sorted(p.name for p in clean(info)) == ["checkpoints", "videos"]
    for name in ("old", "crashed"):
        left = sorted(p.name for p in (runs / name).iterdir())
        assert left == ["config.json", "labels.sqlite", "summary.json", "tb"]
    assert (runs / "fresh" / "checkpoints" / "blob").exists()
    assert {p: _digest(p) for p in runs.glob("*/labels.sqlite")} == stores


def test_min_labels_and_age_rules(runs: Path) -> None:
    infos = {i.path.name: i for i in scan(runs, now=NOW)}
    rule = CleanRule(max_age_days=1000, min_labels=10, crashed=False)
    assert rule.reason(infos["fresh"]) == "5 labels < 10"
    assert rule.reason(infos["killed"]) is None and rule.reason(infos["crashed"]) is None
    assert CleanRule(max_age_days=30).reason(infos["old"]) == "untouched for 40 days"


def test_a_ratings_run_counts_its_grades_as_labels_and_keeps_its_checkpoints(
    runs: Path, capsys
) -> None:
    """--feedback-kind ratings answers go to the store's ratings table, not labels: a run with
    35 grades has given 35 answers, so --min-labels 30 keeps it (and lists its grades)."""
    _fake_run(runs, "graded", "finished", labels=0, age_days=2, ratings=35)
    _fake_run(runs, "mixed", "finished", labels=20, age_days=2, ratings=15)
    args = ["--runs-dir", str(runs), "--min-labels", "30", "--max-age-days", "1000"]
    main(["runs", "clean", *args, "--no-crashed", "--no-dry-run"])
    out = capsys.readouterr().out
    assert "fresh (5 labels < 30): removed" in out and "graded" not in out and "mixed" not in out
    assert (runs / "graded" / "checkpoints" / "blob").exists()
    assert (runs / "mixed" / "checkpoints" / "blob").exists()
    main(["runs", "list", "--runs-dir", str(runs)])
    rows = {line.split()[0]: line for line in capsys.readouterr().out.splitlines()}
    assert "  35 ratings  " in rows["graded"] and "  20 + 15 ratings  " in rows["mixed"]
    assert "  5  " in rows["fresh"] and "ratings" not in rows["fresh"]
    infos = {i.path.name: i for i in scan(runs, now=NOW)}
    assert (infos["graded"].labels, infos["graded"].ratings) == (0, 35)
    assert infos["mixed"].answers == 35 and infos["fresh"].ratings == 0
    few = _fake_run(runs, "few", "finished", labels=0, age_days=2, ratings=3)
    assert CleanRule(1000, 30, False).reason(next(i for i in scan(runs) if i.path == few)) == (
        "3 labels and ratings < 30"
    )


def test_labels_are_never_deleted_even_inside_a_cleaned_part(runs: Path) -> None:
    stray = runs / "old" / "videos" / "labels.sqlite"
    stray.write_bytes(b"precious")
    info = next(i for i in scan(runs, now=NOW) if i.path.name == "old")
    with pytest.raises(OSError, match="labels are never deleted"):
        clean(info)
    assert stray.read_bytes() == b"precious"


def test_clean_never_follows_a_link_out_of_the_run(runs: Path, tmp_path_factory) -> None:
    outside = tmp_path_factory.mktemp("elsewhere")
    (outside / "keep.pt").write_bytes(b"mine")
    checkpoints = runs / "old" / "checkpoints"
    for file in checkpoints.iterdir():
        file.unlink()
    checkpoints.rmdir()
    checkpoints.symlink_to(outside, target_is_directory=True)
    info = next(i for i in scan(runs, now=NOW) if i.path.name == "old")
    clean(info)
    assert not checkpoints.exists() and (outside / "keep.pt").read_bytes() == b"mine"


def test_cli_clean_is_a_dry_run_unless_told(runs: Path, capsys) -> None:
    main(["runs", "clean", "--runs-dir", str(runs)])
    out = capsys.readouterr().out
    assert "old (untouched for 40 days): would remove videos/ and checkpoints/" in out
    assert "add --no-dry-run" in out and (runs / "old" / "videos").exists()
    main(["runs", "clean", "--runs-dir", str(runs), "--no-dry-run"])
    assert "removed 3.9 KiB from 2 of 4 runs" in capsys.readouterr().out
    assert not (runs / "old" / "videos").exists() and (runs / "old" / "labels.sqlite").exists()
    main(["runs", "report", "--runs-dir", str(runs)])
    assert "4 runs" in capsys.readouterr().out


def test_a_run_named_with_a_newline_or_a_wrong_summary_is_one_row_of_the_list(
    tmp_path: Path, capsys
) -> None:
    """rlhf train refuses such a name, but a directory can be made by hand: the listing shows it
    escaped on one line, and a summary.json edited by hand does not stop it."""
    _fake_run(tmp_path, "two\nlines\x1b[2J", "finished", labels=3, age_days=1)
    good = _fake_run(tmp_path, "good", "finished", labels=5, age_days=2)
    (good / "summary.json").write_text(
        json.dumps({"status": "finished", "env_steps": "many", "final_true_return": [1]})
    )
    main(["runs", "list", "--runs-dir", str(tmp_path)])
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 3  # the head and one line per run
    assert lines[1].startswith("two\\nlines\\x1b[2J ") and "\x1b" not in "".join(lines)
    assert lines[2].split()[:5] == ["good", "Hopper-v5", "finished", "-", "5"]  # rewritten: newest


def test_cli_errors_are_one_line(tmp_path: Path, capsys) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["runs", "--runs-dir", str(tmp_path / "nope")])
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and err.count("\n") == 1 and "--runs-dir" in err


def test_a_running_run_is_locked_listed_as_running_and_never_cleaned(runs: Path) -> None:
    target = RunDir(runs / "crashed")
    with trainer_lock(target):
        assert is_trainer_running(target)
        with (
            pytest.raises(ConfigError, match="being trained by another process"),
            trainer_lock(target),
        ):
            pass
        info = next(i for i in scan(runs, now=NOW) if i.path.name == "crashed")
        assert info.status == "running" and CleanRule().reason(info) is None
    assert not is_trainer_running(target)


def test_a_killed_trainer_leaves_no_stale_lock(tmp_path: Path) -> None:
    target = RunDir(tmp_path)
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; from pathlib import Path; from rlhf.run.run_dir import RunDir,"
            " trainer_lock\nwith trainer_lock(RunDir(Path(sys.argv[1]))):\n"
            " print('held', flush=True); time.sleep(60)",
            str(tmp_path),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
    assert is_trainer_running(target)
    holder.send_signal(signal.SIGKILL)
    holder.wait()
    assert not is_trainer_running(target)


def test_a_real_run_is_listed_with_its_summary(tmp_path: Path) -> None:
    query = QueryConfig(total_labels=8, segment_length=20)
    cfg = tiny_config(tmp_path, "Pendulum-v1", run_name="real", query=query)
    summary = run(cfg)
    (info,) = scan(tmp_path)
    assert info.status == "finished" and info.labels == summary.labels_used > 0
    assert info.env_steps == summary.env_steps and info.env_id == "Pendulum-v1"
    assert not is_trainer_running(RunDir(info.path))
    with trainer_lock(RunDir(info.path)):  # as if its first trainer were still running
        resumed = replace(cfg, resume=str(info.path), total_timesteps=1024)
        with pytest.raises(ConfigError, match="being trained by another process"):
            run(resumed)
        # Before its first checkpoint too: the busy trainer is the reason, not the checkpoint.
        (info.path / "checkpoints" / "last.pt").unlink()
        with pytest.raises(ConfigError, match="being trained by another process"):
            run(resumed)
