"""bench_pebble's grid across sittings: a run stopped before its result was saved goes on from
its checkpoint (a 300k PEBBLE run takes most of an hour here), a damaged one starts again."""

from __future__ import annotations

import json
import sys
from dataclasses import asdict
from pathlib import Path

import numpy as np
import pytest

SCRIPTS = str(Path(__file__).resolve().parents[2] / "scripts")
if SCRIPTS not in sys.path:  # as when run
    sys.path.insert(0, SCRIPTS)
import bench_pebble as bench  # noqa: E402
from _bench_pebble_jobs import (  # noqa: E402
    PEBBLE_FIT,
    Job,
    Result,
    cpu_name,
    load,
    resumed_or_fresh,
    train,
)


def _quick_job(out: Path, arm: str, settings: tuple = ()) -> Job:
    """A --quick HalfCheetah job of ``arm`` on seed 1 in ``out`` (the sac arm has no labels)."""
    return Job(
        "HalfCheetah-v5", arm, 1, 1000, 0 if arm == "sac" else 20, 0.0, True, str(out),
        "float32", settings,
    )  # fmt: skip


def _record_runs(monkeypatch: pytest.MonkeyPatch) -> list[Job]:
    """The jobs bench_pebble hands to Ray from now on, recorded instead of run (each "ends" at
    45)."""
    ran: list[Job] = []

    def fake_run_jobs(fn, jobs, **_):
        ran.extend(jobs)
        return [Result(j, 45.0, 50.0, []) for j in jobs]

    monkeypatch.setattr(bench, "run_jobs", fake_run_jobs)
    return ran


def test_a_stopped_run_goes_on_from_its_checkpoint_and_a_damaged_one_starts_again(
    short_tmp: Path,
) -> None:
    job = Job("HalfCheetah-v5", "pebble", 1, 1000, 20, 0.0, True, str(short_tmp))
    first = train(job)
    run_dir, saved = short_tmp / job.key, short_tmp / "results" / f"{job.key}.json"
    (run_dir / "marker").write_text("")  # what starting the run again would remove
    saved.unlink()  # stopped after its last checkpoint, before its result was saved
    again = train(job)
    assert (run_dir / "marker").exists(), "the run started again instead of going on"
    assert again.cpu == cpu_name() == json.loads(saved.read_text())["cpu"]
    assert again.curve == first.curve and saved.is_file()
    saved.unlink()
    (run_dir / "checkpoints" / "last.pt").write_bytes(b"not a checkpoint")
    fresh = train(job)
    assert not (run_dir / "marker").exists()  # started again, in an emptied directory
    assert fresh.curve == first.curve  # one seed makes the run


def test_a_run_that_max_minutes_ends_early_is_read_over_the_last_tenth_it_reached(
    short_tmp: Path,
) -> None:
    job = Job(
        "Hopper-v5", "sac", 1, 20_000, 0, 0.0, True, str(short_tmp), "float32",
        (("max_minutes", 0.05),),  # 3 s: an iteration or a few of SAC's 1,000 steps
    )  # fmt: skip
    result = train(job)
    reached = json.loads((short_tmp / job.key / "summary.json").read_text())["env_steps"]
    assert 1000 <= reached < job.steps
    late = [ret for step, ret in result.curve if step >= 0.9 * reached]
    assert len(late) >= 2 and result.final_return == pytest.approx(np.mean(late))


def test_cpu_name_is_the_model_name_of_cpuinfo_else_the_platforms(tmp_path: Path) -> None:
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC 9654\n")
    assert cpu_name(cpuinfo) == "AMD EPYC 9654"
    assert cpu_name(tmp_path / "absent") not in ("", "AMD EPYC 9654")


def test_a_run_another_invocation_is_training_is_never_removed(short_tmp: Path) -> None:
    from rlhf.config import Config, ConfigError
    from rlhf.run.run_dir import RunDir, trainer_lock

    run_dir = short_tmp / "held"
    run_dir.mkdir()
    (run_dir / "config.json").write_text("{}")  # stopped before its first checkpoint
    with trainer_lock(RunDir(run_dir)), pytest.raises(ConfigError, match="another process"):
        resumed_or_fresh(Config(env_id="HalfCheetah-v5"), run_dir)
    assert (run_dir / "config.json").is_file()


def test_arms_runs_only_the_arms_named_and_shows_every_kept_result(
    short_tmp: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def job(arm: str) -> Job:
        return _quick_job(short_tmp, arm)

    kept = Result(job("sac"), 100.0, 50.0, [(1000, 100.0)])
    (short_tmp / "results").mkdir()
    moved = asdict(kept) | {"job": asdict(kept.job) | {"out": "runs/elsewhere"}}
    del moved["cpu"]  # written before results kept their CPU
    (short_tmp / "results" / f"{kept.job.key}.json").write_text(json.dumps(moved))
    assert load(short_tmp)[kept.job.key].job == kept.job  # a moved result belongs here
    ran: list[str] = []

    def fake_run_jobs(fn, jobs, **_):
        ran.extend(j.arm for j in jobs)
        return [Result(j, 45.0, 50.0, [(1000, 45.0)], "Test CPU") for j in jobs]

    monkeypatch.setattr(bench, "run_jobs", fake_run_jobs)
    argv = ["bench_pebble.py", "--quick", "--hidden-dtype", "float32", "--arms", "pebble"]
    monkeypatch.setattr(sys, "argv", [*argv, "--out", str(short_tmp)])
    bench.main()
    out = capsys.readouterr().out
    assert ran == ["pebble"]  # neither the kept SAC run again, nor PPO
    assert "0 of 1 runs already" in out
    assert "| sac | 100 |" in out and "| pebble | 45 |" in out and "| ppo |" not in out
    assert "| 50 | not recorded |" in out and "| 50 | Test CPU |" in out  # each row's machine
    assert "ratio_pebble_over_sac_halfcheetah=0.45" in out


def test_a_pebble_row_without_a_sac_run_says_so_instead_of_a_ratio(
    short_tmp: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _record_runs(monkeypatch)
    argv = ["bench_pebble.py", "--quick", "--hidden-dtype", "float32", "--arms", "pebble"]
    monkeypatch.setattr(sys, "argv", [*argv, "--out", str(short_tmp)])
    bench.main()
    out = capsys.readouterr().out
    assert "| pebble | 45 | 45 +- 0 | - | no SAC run |" in out
    assert "nan" not in out and "ratio_pebble_over_sac" not in out


def test_the_table_shows_runs_another_driver_finished_in_the_same_out_meanwhile(
    short_tmp: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def job(arm: str) -> Job:
        return _quick_job(short_tmp, arm)

    def fake_run_jobs(fn, jobs, **_):
        other = Result(job("sac"), 90.0, 50.0, [])  # saved by a driver with --arms sac
        (short_tmp / "results").mkdir(exist_ok=True)
        (short_tmp / "results" / f"{other.job.key}.json").write_text(json.dumps(asdict(other)))
        return [Result(j, 45.0, 50.0, []) for j in jobs]

    monkeypatch.setattr(bench, "run_jobs", fake_run_jobs)
    argv = ["bench_pebble.py", "--quick", "--hidden-dtype", "float32", "--arms", "pebble"]
    monkeypatch.setattr(sys, "argv", [*argv, "--out", str(short_tmp)])
    bench.main()
    out = capsys.readouterr().out
    assert "| sac | 90 |" in out and "ratio_pebble_over_sac_halfcheetah=0.50" in out


def test_set_runs_a_pebble_variant_under_its_own_key_beside_the_kept_arms(
    short_tmp: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def job(arm: str, settings: tuple = ()) -> Job:
        return _quick_job(short_tmp, arm, settings)

    variant = job("pebble", (("sac.recent_share", 0.5),))
    (short_tmp / "results").mkdir()
    for kept in (Result(job("sac"), 100.0, 50.0, []), Result(variant, 70.0, 40.0, [])):
        path = short_tmp / "results" / f"{kept.job.key}.json"
        path.write_text(json.dumps(asdict(kept)))  # JSON makes the settings' tuples lists
    assert variant.key != job("pebble").key and "recent_share=0.5" in variant.key
    assert load(short_tmp)[variant.key].job == variant  # read back under its own key
    ran = _record_runs(monkeypatch)
    argv = ["bench_pebble.py", "--quick", "--hidden-dtype", "float32", "--out", str(short_tmp)]
    monkeypatch.setattr(sys, "argv", [*argv, "--arms", "pebble", "--set", "sac.recent-share=0.5"])
    bench.main()
    assert ran == []  # the variant's kept run serves; the default's is another key
    assert "| pebble (sac.recent-share=0.5) | 70 |" in capsys.readouterr().out
    monkeypatch.setattr(sys, "argv", [*argv, "--arms", "pebble", "--set", "query.pool-size=200"])
    bench.main()
    assert [j.settings for j in ran] == [(("query.pool_size", 200),)]  # pebble only, its setting
    assert "| sac | 100 |" in capsys.readouterr().out


def test_a_result_of_an_earlier_default_is_not_taken_for_todays(
    short_tmp: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    default = _quick_job(short_tmp, "pebble")
    assert "query.pool_size=125__query.selection=uniform" in default.key  # QPA's queries
    (short_tmp / "results").mkdir()
    before = default.key.replace(f"__{PEBBLE_FIT}", "__e32")  # 2000 by disagreement
    (short_tmp / "results" / f"{before}.json").write_text(
        json.dumps(asdict(Result(default, 70.0, 40.0, [])))
    )  # its job holds no settings: the default of its day
    assert set(load(short_tmp)) == {before}
    ran = _record_runs(monkeypatch)
    argv = ["bench_pebble.py", "--quick", "--hidden-dtype", "float32", "--out", str(short_tmp)]
    monkeypatch.setattr(sys, "argv", [*argv, "--arms", "pebble"])
    bench.main()
    assert [j.key for j in ran] == [default.key]  # run again under today's default
    set_today = ["--set", "query.pool-size=125", "--set", "query.selection=uniform"]
    monkeypatch.setattr(sys, "argv", [*argv, "--arms", "pebble", *set_today])
    ran.clear()
    bench.main()
    assert [(j.key, j.settings) for j in ran] == [(default.key, ())]  # the same run


def test_set_env_kwargs_changes_the_task_of_every_arm(
    short_tmp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ran = _record_runs(monkeypatch)
    kwargs = 'env-kwargs={"forward_reward_weight": 2.0}'
    argv = ["bench_pebble.py", "--quick", "--out", str(short_tmp), "--set", kwargs]
    monkeypatch.setattr(sys, "argv", [*argv, "--set", "sac.recent-share=0.5"])
    bench.main()
    task = ("env_kwargs", '{"forward_reward_weight": 2.0}')
    assert {j.arm: j.settings for j in ran} == {
        "sac": (task,),  # SAC on the true reward of the same task, not of the default one
        "pebble": (task, ("sac.recent_share", 0.5)),
        "ppo": (task,),  # PPO-RLHF: the task's, not PEBBLE's variant
    }


@pytest.mark.parametrize(
    ("item", "message"),
    [("seed=3", "--set seed: the benchmark sets it"), ("sac.recent-share=2", "recent-share")],
)
def test_set_refuses_what_the_benchmark_sets_and_values_out_of_range(
    item: str, message: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(sys, "argv", ["bench_pebble.py", "--quick", "--set", item])
    with pytest.raises(SystemExit) as exit_:
        bench.main()
    assert exit_.value.code == 2 and message in capsys.readouterr().err


def test_the_seed_flags_choose_the_seeds_and_the_run_says_which(
    short_tmp: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    ran = _record_runs(monkeypatch)
    argv = ["bench_pebble.py", "--env-id", "Hopper-v5", "--arms", "pebble", "--mistake", "0.1"]
    monkeypatch.setattr(sys, "argv", [*argv, "--seed-set", "report", "--n-seeds", "2"])
    bench.main()
    assert [(j.env_id, j.seed, j.labels, j.mistake) for j in ran] == [
        ("Hopper-v5", 101, 200, 0.1), ("Hopper-v5", 102, 200, 0.1)
    ]  # fmt: skip
    assert "seeds 101, 102 (--seed-set report)" in capsys.readouterr().out
    ran.clear()
    monkeypatch.setattr(sys, "argv", [*argv, "--seeds", "7", "3", "--n-seeds", "5"])
    bench.main()  # a list wins over a count, as in scripts/bench_rlhf.py
    assert [j.seed for j in ran] == [7, 3]
    assert "seeds 7, 3 (--seeds)" in capsys.readouterr().out
    monkeypatch.setattr(sys, "argv", [*argv, "--n-seeds", "13"])  # the tuning set has 12
    with pytest.raises(SystemExit) as exit_:
        bench.main()
    assert exit_.value.code == 2 and "--n-seeds 13: the tune set has 12" in capsys.readouterr().err


def test_target_makes_a_behaviour_the_true_reward_of_every_arm(
    short_tmp: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    ran = _record_runs(monkeypatch)
    argv = ["bench_pebble.py", "--env-id", "Hopper-v5", "--seeds", "101", "--out", str(short_tmp)]
    monkeypatch.setattr(sys, "argv", [*argv, "--target", "stand", "none"])
    bench.main()
    assert sorted((j.target or "", j.arm) for j in ran) == [
        ("", "pebble"), ("", "ppo"), ("", "sac"),
        ("stand", "pebble"), ("stand", "ppo"), ("stand", "sac"),
    ]  # fmt: skip
    keys = {j.key for j in ran}
    assert len(keys) == 6 and sum("target=stand" in k for k in keys) == 3  # a task of its own
    out = capsys.readouterr().out
    assert "| Hopper-v5 stand, 300k, 200 labels | pebble |" in out
    assert "| Hopper-v5, 300k, 200 labels | pebble |" in out
    monkeypatch.setattr(sys, "argv", [*argv, "--target", "backflip-twice"])
    with pytest.raises(SystemExit) as exit_:
        bench.main()
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and "--target backflip-twice" in err and "stand" in err


def test_a_target_runs_with_the_teacher_and_the_true_reward_it_names(
    short_tmp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import rlhf.run.runner as runner

    class Recorded(Exception):
        pass

    seen = []

    def record(cfg):
        seen.append(cfg)
        raise Recorded  # the config is all this test reads: no run

    monkeypatch.setattr(runner, "run", record)
    job = Job("Hopper-v5", "sac", 101, 1000, 0, 0.1, True, str(short_tmp), target="hop")
    with pytest.raises(Recorded):
        train(job)
    assert seen[0].teacher.target == "hop" and seen[0].reward == "env"
