"""Sweeps of tiny runs on a local Ray (2 CPUs at most): a stop and a rerun, errors and retries."""

from __future__ import annotations

import csv
import io
import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rlhf.cli import main
from rlhf.sweep.command import Sweep
from rlhf.sweep.driver import prepare, run_sweep
from rlhf.sweep.spec import SpecError
from rlhf.sweep.worker import Action, plan
from tests.support.toy_env import ENV_ID
from tests.support.workers import RAY
from tests.sweep.envs import DIE_MARKER, DIES_ONCE, FAIL_AT, RAISES, SLOW

pytest.importorskip("ray")

pytestmark = RAY

ROOT = Path(__file__).resolve().parents[2]
SPEC = """
seeds = [1, 2]
setup = ["tests.sweep.envs:register"]

[train]
env-id = "rlhf-test/PointGoal-v0"
total-timesteps = {steps}
num-steps = 256
num-minibatches = 4
update-epochs = 2
checkpoint-every = 1
query.segment-length = 10

[grid]
"query.total-labels" = [20, 40]
"""
CELLS = [f"query.total-labels={n}__seed={s}" for n in (20, 40) for s in (1, 2)]


def _summary(path: Path) -> dict:
    return json.loads((path / "summary.json").read_text())


def _finished(path: Path) -> bool:
    try:
        return _summary(path)["status"] == "finished"
    except (OSError, ValueError):
        return False


def _stop_halfway(spec: Path, out: Path) -> subprocess.Popen:
    """Run the sweep one cell at a time; Ctrl-C it once a cell finished and the next has begun."""
    child = subprocess.Popen(
        [sys.executable, "-m", "rlhf", "sweep", str(spec), "--sweep-dir", str(out),
         "--num-cpus", "1", "--no-dashboard"],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        # A suite started in the background by a non-interactive shell inherits SIGINT ignored,
        # and Python keeps it so: give the sweep the Ctrl-C a terminal would.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )  # fmt: skip
    deadline = time.monotonic() + 120
    while not (_finished(out / CELLS[0]) and (out / CELLS[1] / "checkpoints" / "last.pt").exists()):
        if child.poll() is not None or time.monotonic() > deadline:
            child.kill()
            pytest.fail(f"the sweep never got halfway: {child.communicate()[1][-2000:]}")
        time.sleep(0.05)
    child.send_signal(signal.SIGINT)
    return child


def test_a_2x2_sweep_stopped_halfway_then_rerun_runs_only_the_missing_cells(
    tmp_path: Path,
) -> None:
    spec, out = tmp_path / "grid.toml", tmp_path / "sweep"
    # 3 s or more a cell at any machine load: the stop lands in the middle of the second cell.
    spec.write_text(SPEC.format(steps=1536).replace(ENV_ID, SLOW))
    child = _stop_halfway(spec, out)
    try:
        _, err = child.communicate(timeout=180)
    finally:
        child.kill()
    assert child.returncode == 130, err
    last = err.strip().splitlines()[-1]
    assert last.startswith("rlhf: sweep stopped with 1 of 4 cells finished; the same command"), err
    before = {name: _summary(out / name) for name in CELLS if _finished(out / name)}
    stopped = [n for n in CELLS if n not in before and (out / n / "checkpoints/last.pt").exists()]
    assert list(before) == CELLS[:1] and stopped == CELLS[1:2]  # it wrote a checkpoint
    assert _summary(out / CELLS[1])["status"] == "interrupted"
    mtimes = {name: (out / name / "summary.json").stat().st_mtime_ns for name in before}

    printed = io.StringIO()
    results = run_sweep(Sweep(str(spec), sweep_dir=str(out), num_cpus=2, dashboard=False), printed)

    assert [r.name for r in results] == CELLS and all(r.ok for r in results)
    for r in results:
        summary = _summary(out / r.name)
        assert summary["status"] == "finished" and summary["env_steps"] == 1536
        if r.name in before:  # not run again: the very same summary file
            assert not r.ran and summary == before[r.name]
            assert (out / r.name / "summary.json").stat().st_mtime_ns == mtimes[r.name]
        else:  # resumed from its checkpoint, or started for the first time
            assert r.ran and summary["sessions"] == (2 if r.name in stopped else 1), r.name
    table = printed.getvalue()
    assert table.count("finished") == 4 and "IQM [95% CI]" in table
    rows = list(csv.DictReader((out / "results.csv").open()))
    assert [row["cell"] for row in rows] == CELLS
    assert all(row["status"] == "finished" and float(row["sps"]) > 0 for row in rows)
    assert all(float(row["final_true_return"]) < 0 and row["labels_used"] for row in rows)
    assert len(list(csv.DictReader((out / "groups.csv").open()))) == 2
    assert all(r.curve and r.curve[-1][0] == 1536 for r in results)  # one curve per cell

    # A rerun with a larger budget continues the finished cells; any other change is refused.
    cells = prepare(Sweep(str(spec), sweep_dir=str(out)))[1]
    assert {plan(cell)[0] for cell in cells} == {Action.SKIP}
    longer = prepare(Sweep(str(spec), sweep_dir=str(out), train=("total-timesteps=3072",)))[1]
    action, config = plan(longer[0])
    assert action is Action.RESUME and config.resume == str(out / CELLS[0])
    changed = Sweep(str(spec), sweep_dir=str(out), train=("learning-rate=0.001",))
    with pytest.raises(
        SpecError, match=r"ran with learning-rate = 0.0003 and the spec now says 0.001"
    ):
        run_sweep(changed)


def test_a_cell_that_raises_is_a_row_with_its_error_and_a_killed_worker_resumes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(DIE_MARKER, str(tmp_path / "died"))  # Ray's workers inherit it
    spec, out = tmp_path / "errors.toml", tmp_path / "sweep"
    spec.write_text(SPEC.format(steps=2048).replace("seeds = [1, 2]", "seeds = [1]"))
    ids = f"env-id=rlhf-test/PointGoal-v0,{RAISES},{DIES_ONCE}"
    with pytest.raises(SystemExit) as info:
        main(["sweep", str(spec), "--sweep-dir", str(out), "--grid", ids,
              "--train", "query.total-labels=20", "--num-cpus", "2", "--no-dashboard",
              "--max-retries", "1"])  # fmt: skip
    assert info.value.code == 1
    captured = capsys.readouterr()
    assert "rlhf: 1 of 3 cells did not finish" in captured.err
    rows = {row["env-id"]: row for row in csv.DictReader((out / "results.csv").open())}
    assert rows["rlhf-test/PointGoal-v0"]["status"] == "finished"
    broken = rows[RAISES]
    assert broken["status"] == "crashed"
    assert broken["error"] == f"RuntimeError: the env broke at step {FAIL_AT}"
    assert f"RuntimeError: the env broke at step {FAIL_AT}" in captured.out  # printed table
    # The worker was killed at step 700; Ray ran the cell again, and it went on from step 512.
    assert (tmp_path / "died").exists()
    died = rows[DIES_ONCE]
    assert died["status"] == "finished" and died["sessions"] == "2" and died["env_steps"] == "2048"
