"""scripts/bench_rlhf.py: its --set (further rlhf train settings for the RLHF runs, checked up
front, applied to the run's config and named in a result's file, so a cached result is reused only
for the same settings), its teachers (every combination of the teacher flags, one row each, beside
one PPO run per task and seed), its targets, its seed sets and the results it reads back."""

from __future__ import annotations

import importlib.util
import json
import math
import re
import shutil
import sys
from dataclasses import asdict, fields
from pathlib import Path

import pytest

from rlhf.config import Config, TeacherConfig
from rlhf.sweep.spec import SpecError
from tests.bench.test_benchmarks import TIMEOUT_S, check_headline, parse_figures, run_quick
from tests.support.workers import RAY

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"
if str(SCRIPTS) not in sys.path:  # as when run: its private modules sit beside it
    sys.path.insert(0, str(SCRIPTS))
import _bench_rlhf_jobs  # noqa: E402
import _bench_rlhf_runs  # noqa: E402
from _bench_grid import with_settings  # noqa: E402
from _bench_rlhf_jobs import TEACHER, Job, make_teachers, preset_settings, set_flags  # noqa: E402
from _bench_rlhf_runs import Result, load, train  # noqa: E402

BENCH = SCRIPTS / "bench_rlhf.py"
HAS_TARGET = "target" in {f.name for f in fields(TeacherConfig)}
"""Whether TeacherConfig has its target yet (--teacher.target: a target behaviour's reward)."""


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("bench_rlhf", BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_rlhf"] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def test_set_reaches_the_config_of_the_run() -> None:
    settings = set_flags(
        ["query.segment-length=25", "reward-model.hidden-sizes=[128, 128]", "gamma=0.995"]
    )
    assert settings == (
        ("query.segment_length", 25),
        ("reward_model.hidden_sizes", (128, 128)),
        ("ppo.gamma", 0.995),
    )
    cfg = with_settings(Config(env_id="Walker2d-v5"), settings)
    assert cfg.query.segment_length == 25
    assert cfg.reward_model.hidden_sizes == (128, 128)
    assert cfg.ppo.gamma == 0.995
    assert cfg.env_id == "Walker2d-v5"  # the rest as it was


@pytest.mark.parametrize(
    ("item", "message"),
    [
        ("query.segment-lenght=25", "did you mean query.segment-length"),
        ("query.segment-length=many", "is not a value it takes"),
        ("query.segment-length", "expected KEY=VALUE"),
        ("query.total_labels=200", "--set query.total-labels: .* use its --labels"),
        ("end-margin=0.3", "use its --end-margin"),
        ("reward=env", "the benchmark sets it"),
        ("teacher.mistake=0.1", "use its --mistake"),
        ("teacher.gamma=0.9", "use its --myopia"),
        ("teacher.target=x", "use its --target"),
        ("gamma=2", "--gamma must be in"),  # out of range: refused before any run
    ],
)
def test_a_bad_or_owned_setting_is_one_line(item: str, message: str) -> None:
    with pytest.raises(SpecError, match=message):
        set_flags([item])


def test_a_result_is_reused_only_for_the_same_settings(tmp_path: Path) -> None:
    plain = Job("Walker2d-v5", "rlhf", 1, 1000, 10)
    short = Job("Walker2d-v5", "rlhf", 1, 1000, 10, settings=(("query.segment_length", 25),))
    wide = Job(
        "Walker2d-v5", "rlhf", 1, 1000, 10, settings=(("reward_model.hidden_sizes", (128, 128)),)
    )
    assert len({plain.key, short.key, wide.key}) == 3
    assert short.key.endswith("__query.segment_length=25")
    result = Result(wide, 1.0, 2.0, 10, 0.9, [(1, 2.0)])
    (tmp_path / f"{wide.key}.json").write_text(json.dumps(asdict(result)))
    loaded = load(tmp_path)
    assert list(loaded) == [wide.key]
    assert loaded[wide.key].job == wide  # the settings' tuples survive JSON


def test_the_preset_is_resolved_with_the_settings() -> None:
    # Hopper's margin moves a learned end: with a fixed horizon there is none, as in rlhf train.
    assert preset_settings("Hopper-v5", "rlhf", None, None, None)["end_margin"] == 0.3
    fixed = (("terminations", "fixed-horizon"),)
    assert preset_settings("Hopper-v5", "rlhf", None, None, None, fixed)["end_margin"] == 0.0


def test_a_margin_keys_only_the_runs_it_moves() -> None:
    # PPO on the true reward has no learned end: a margin screen reuses its baseline.
    assert preset_settings("Walker2d-v5", "ppo", None, None, -1.0)["end_margin"] == 0.0
    assert preset_settings("Walker2d-v5", "rlhf", None, None, -1.0)["end_margin"] == -1.0
    fixed = (("terminations", "fixed-horizon"),)
    assert preset_settings("Walker2d-v5", "rlhf", None, None, -1.0, fixed)["end_margin"] == 0.0


def test_ppo_has_no_teacher_and_every_other_setting_is_in_the_key() -> None:
    ppo = Job("Hopper-v5", "ppo", 101, 1000, 0)
    oracle = Job("Hopper-v5", "rlhf", 101, 1000, 200)
    noisy = Job("Hopper-v5", "rlhf", 101, 1000, 200, teacher=(("teacher.mistake", 0.1),))
    assert ppo.key == "Hopper-v5__ppo__101__1000"  # no label budget: one run serves every teacher
    assert oracle.key == "Hopper-v5__rlhf__101__1000__200"  # the perfect teacher's, as before
    assert noisy.key == "Hopper-v5__rlhf__101__1000__200__teacher.mistake=0.1"
    # Results saved with --set teacher.mistake=0.1 (before --mistake) keep the key they had.
    old = Job("Hopper-v5", "rlhf", 101, 1000, 200, settings=(("teacher.mistake", 0.1),))
    assert old.key == noisy.key
    for mode in ("ppo", "rlhf"):
        aimed = Job("Hopper-v5", mode, 101, 1000, 0, target="backflip")
        assert "__target=backflip" in aimed.key
        assert aimed.run_settings == (("teacher.target", "backflip"),)  # both modes: its reward


def test_every_combination_of_the_teacher_flags_is_a_teacher() -> None:
    noise = {path: None for path in TEACHER} | {"teacher.mistake": [0.0, 0.1]}
    teachers = make_teachers([200, 700], noise)
    assert [t.text() for t in teachers] == [
        "200 labels",
        "200 labels, 10% wrong",
        "700 labels",
        "700 labels, 10% wrong",
    ]
    assert [t.tag for t in teachers] == ["200l", "200l_m0.1", "700l", "700l_m0.1"]
    noise = {path: [value] for path, value in zip(TEACHER, (1, 0.99, 0.2, 0.1, 0.05), strict=True)}
    (teacher,) = make_teachers([50], noise)
    assert teacher.text("ratings") == (
        "50 ratings, beta 1, myopia 0.99, 20% wrong, skip 0.1, equal 0.05"
    )
    with pytest.raises(SpecError, match=r"^--mistake 2: --mistake must be in \[0, 1\]$"):
        make_teachers([200], {"teacher.mistake": [2.0]})
    with pytest.raises(SpecError, match=r"^--labels -1: --labels must be >= 0$"):
        make_teachers([-1], {})


@pytest.mark.parametrize(
    ("argv", "seeds", "where"),
    [
        ([], [101, 102, 103], "report"),  # held out: never used to tune
        (["--quick"], [101], "report"),
        (["--seed-set", "tune", "--n-seeds", "12"], list(range(1, 13)), "tune"),
        (["--n-seeds", "5"], [101, 102, 103, 104, 105], "report"),
        (["--seeds", "1", "2", "--n-seeds", "5"], [1, 2], "given"),
    ],
)
def test_the_script_chooses_the_seeds(bench, argv: list[str], seeds: list[int], where: str) -> None:
    assert bench.choose_seeds(bench._parser().parse_args(argv)) == (seeds, where)


def test_the_tuning_set_has_twelve_seeds(bench) -> None:
    with pytest.raises(SpecError, match="the tune set has 12 seeds"):
        bench.choose_seeds(bench._parser().parse_args(["--seed-set", "tune", "--n-seeds", "13"]))


def test_an_unknown_target_is_refused_before_any_run(bench) -> None:
    with pytest.raises(SpecError, match=r"^--target no-such-target\b"):
        bench.check_targets(["no-such-target"], ["Hopper-v5"])
    assert bench.check_targets(None, ["Hopper-v5"]) == [None]


@pytest.mark.skipif(not HAS_TARGET, reason="TeacherConfig has no target yet")
def test_a_target_is_checked_on_every_env(bench) -> None:
    assert bench.check_targets(["none", "backflip"], ["Hopper-v5"]) == [None, "backflip"]
    with pytest.raises(SpecError, match="--target backflip: not a target for Walker2d-v5"):
        bench.check_targets(["backflip"], ["Hopper-v5", "Walker2d-v5"])


def test_a_setting_that_changes_the_task_runs_ppo_with_it_too(bench) -> None:
    # Ant without its contact forces is another task: a ratio against PPO on the full observation
    # would compare two tasks, so PPO's run (and its key) has the env's arguments; the rest is
    # RLHF's alone.
    nocfrc = 'env-kwargs={"include_cfrc_ext_in_observation": false}'
    args = bench._parser().parse_args(["--env-id", "Ant-v5", "--seeds", "1"])
    extra = set_flags([nocfrc, "query.segment-length=25"])
    ppo, rlhf = bench._grid(args).jobs(args, extra)
    assert (ppo.mode, rlhf.mode) == ("ppo", "rlhf")
    kwargs = ("env_kwargs", '{"include_cfrc_ext_in_observation": false}')
    assert ppo.settings == (kwargs,) and rlhf.settings == (kwargs, ("query.segment_length", 25))
    assert "include_cfrc_ext_in_observation" in ppo.key
    run = with_settings(Config(env_id="Ant-v5"), ppo.run_settings)
    assert run.env_kwargs_dict() == {"include_cfrc_ext_in_observation": False}
    plain, _ = bench._grid(args).jobs(args, set_flags(["query.segment-length=25"]))
    assert plain.settings == () and plain.key == "Ant-v5__ppo__1__300000__logstd-1"  # as before


@pytest.mark.skipif(not HAS_TARGET, reason="TeacherConfig has no target yet")
def test_the_target_reaches_the_config_of_the_run() -> None:
    job = Job("Hopper-v5", "ppo", 101, 1000, 0, target="backflip")
    assert with_settings(Config(), job.run_settings).teacher.target == "backflip"


def _cached(bench, argv: list[str], out: Path) -> list:
    """Results of every job of ``argv``'s grid saved in ``out`` (none run): PPO ends at 100 x
    (seed - 100); RLHF at PPO's x labels / 100, halved with mistakes, 10% more on the second
    seed; it used its labels less (seed - 101) and took 10 x (seed - 100) s. Episodes: PPO's
    200 steps long, RLHF's 100."""
    args = bench._parser().parse_args(argv)
    jobs = bench._grid(args).jobs(args, ())
    for job in jobs:
        final = 100.0 * (job.seed - 100)
        if job.mode != "ppo":
            half = 0.5 if dict(job.teacher).get("teacher.mistake") else 1.0
            final *= job.labels / 100 * half * (1 + 0.1 * (job.seed - 101))
        used = max(job.labels - (job.seed - 101), 0)
        curve = [(1000, final / 2), (20_000, final)]
        length = 200.0 if job.mode == "ppo" else 100.0  # RLHF's episodes end sooner
        result = Result(job, 10.0 * (job.seed - 100), final, used, 0.8, curve, length)
        (out / f"{job.key}.json").write_text(json.dumps(asdict(result)))
    return jobs


def _main(bench, monkeypatch, capsys, argv: list[str]) -> list[str]:
    monkeypatch.setattr(sys, "argv", ["bench_rlhf.py", *argv])
    bench.main()
    return capsys.readouterr().out.rstrip("\n").splitlines()


def test_one_row_per_teacher_beside_one_ppo_run(bench, tmp_path, monkeypatch, capsys) -> None:
    argv = ["--quick", "--n-seeds", "2", "--labels", "20", "100", "--mistake", "0", "0.1"]
    argv += ["--out", str(tmp_path), "--plot", str(tmp_path / "curves.png")]
    jobs = _cached(bench, argv, tmp_path)
    assert len(jobs) == 2 + 4 * 2  # PPO once per seed, not once per teacher
    lines = _main(bench, monkeypatch, capsys, argv)
    assert lines[0] == "seeds: 101 102 (--seed-set report: held out, never used to tune)"
    assert lines[1].startswith("10 runs already in ")  # nothing run: no Ray
    rows = {re.split(r"\s{2,}", line)[1]: line for line in lines if line.startswith("Hopper-v5")}
    assert list(rows) == [
        "20 labels",
        "20 labels, 10% wrong",
        "100 labels",
        "100 labels, 10% wrong",
    ]
    # PPO 100 and 200: 150 ± 71. RLHF 50 and 110: 80 ± 42, ratio 80 / 150, the lower seed's 0.5;
    # labels used 100 and 99; wall time 10 and 20 s; per step (100 / 200 and 200 / 200 against
    # 50 / 100 and 110 / 100): 0.75 and 0.80.
    shown = " ".join(rows["100 labels, 10% wrong"].split()[5:])
    assert shown == "150 ± 71 80 ± 42 0.53 0.50 0.80 100 (99-100) 15 (10-20) 0.75 / 0.80"
    assert all(" 150 ± 71 " in row for row in rows.values())
    figures = parse_figures(lines[-1])
    assert figures["ratio_Hopper_100l_m0.1"] == "0.53"
    assert figures["ratio_Hopper_20l"] == "0.21"
    assert figures["ratio_min"] == "0.11"
    assert (figures["seeds"], figures["seed_set"], figures["teachers"]) == ("2", "report", "4")
    assert (tmp_path / "curves.png").stat().st_size > 0


def test_one_teacher_keeps_the_headline_as_it_was(bench, tmp_path, monkeypatch, capsys) -> None:
    argv = ["--quick", "--labels", "20", "--mistake", "0.1", "--out", str(tmp_path)]
    _cached(bench, argv, tmp_path)
    figures = parse_figures(_main(bench, monkeypatch, capsys, argv)[-1])
    assert figures == {
        "ratio_Hopper": "0.10",
        "ratio_min": "0.10",
        "steps": "20480",
        "seeds": "1",
        "seed_set": "report",
        "labels": "20",
        "mistake": "0.1",
    }


def test_results_saved_before_teachers_are_read(bench, tmp_path, monkeypatch, capsys) -> None:
    """A PPO result saved with its label budget in its name, and a perfect teacher's, serve."""
    argv = ["--quick", "--seeds", "1", "--out", str(tmp_path)]
    for mode, key in (
        ("ppo", "Hopper-v5__ppo__1__20480__100"),
        ("rlhf", "Hopper-v5__rlhf__1__20480__100"),
    ):
        job = {"env_id": "Hopper-v5", "mode": mode, "seed": 1, "steps": 20480, "labels": 100}
        job |= {"init_log_std": 0.0, "replay_share": 0.0, "end_value": "absorbing"}
        job |= {"end_margin": 0.0, "settings": []}  # as saved then: no teacher, no target
        job |= {"end_value": "zero", "end_margin": 0.3} if mode == "rlhf" else {}
        key += "__endzero__margin0.3" if mode == "rlhf" else ""
        final = 200.0 if mode == "ppo" else 150.0
        result = {"job": job, "seconds": 9.0, "final_return": final, "labels": 100}
        result |= {"val_accuracy": None, "curve": [[20000, final]]}
        (tmp_path / f"{key}.json").write_text(json.dumps(result))
    lines = _main(bench, monkeypatch, capsys, argv)
    assert lines[1].startswith("2 runs already in ")
    assert parse_figures(lines[-1])["ratio_Hopper"] == "0.75"
    (row,) = [line for line in lines if line.startswith("Hopper-v5")]
    assert row.endswith(" -")  # no episode lengths were kept then: no figure per step


def test_a_target_is_a_task_of_its_own(bench, tmp_path, monkeypatch, capsys) -> None:
    if not HAS_TARGET:  # until TeacherConfig has it, the runs' configs leave it out
        for where in (_bench_rlhf_jobs, _bench_rlhf_runs):  # where the runs' configs are made
            monkeypatch.setattr(
                where,
                "with_settings",
                lambda cfg, settings: with_settings(
                    cfg, tuple(s for s in settings if s[0] != "teacher.target")
                ),
            )
    monkeypatch.setattr(
        bench, "check_targets", lambda names, envs: [None if n == "none" else n for n in names]
    )
    argv = ["--quick", "--target", "none", "backflip", "--out", str(tmp_path)]
    jobs = _cached(bench, argv, tmp_path)
    assert [(j.mode, j.target) for j in jobs] == [
        ("ppo", None),
        ("rlhf", None),
        ("ppo", "backflip"),
        ("rlhf", "backflip"),
    ]
    lines = _main(bench, monkeypatch, capsys, argv)
    assert [re.split(r"\s{2,}", line)[0] for line in lines if line.startswith("Hopper")] == [
        "Hopper-v5",
        "Hopper-v5 [backflip]",
    ]
    figures = parse_figures(lines[-1])
    assert "ratio_Hopper" in figures and "ratio_Hopper_backflip" in figures


@pytest.mark.slow
@pytest.mark.timeout(TIMEOUT_S + 30)
@RAY
def test_quick_run_of_a_noisy_teacher(short_tmp: Path) -> None:
    pytest.importorskip("ray", reason="needs ray (pip install -e '.[bench]')")
    lines = run_quick(BENCH, short_tmp, "--mistake", "0.1", "--labels", "20")
    assert lines[0].startswith("seeds: 101 ")
    (row,) = [line for line in lines if line.startswith("Hopper-v5")]
    assert " 20 labels, 10% wrong " in row
    *_, used, wall, ppo, slash, rlhf = row.split()
    assert 0 < int(used) <= 20 and float(wall) > 0  # what RLHF used, its wall time
    assert slash == "/" and float(ppo) > 0 and float(rlhf) > 0  # per step: Hopper pays to stand
    figures = check_headline(BENCH, lines)  # bench_rlhf's --quick smoke check (ELSEWHERE)
    assert (figures["labels"], figures["mistake"], figures["seed_set"]) == ("20", "0.1", "report")
    assert math.isfinite(float(figures["ratio_Hopper"]))


def test_keep_runs_keeps_each_runs_directory_under_its_key(tmp_path: Path) -> None:
    keep = tmp_path / "runs"
    job = Job("Hopper-v5", "rlhf", 1, 2048, 10)
    stale = keep / job.key
    stale.mkdir(parents=True)  # an interrupted grid's run: its result was never saved
    (stale / "config.json").write_text("{}")
    result = train(job, keep)
    run = keep / job.key
    assert (run / "summary.json").is_file() and any((run / "tb").iterdir())
    assert (run / "labels.sqlite").is_file()
    assert json.loads((run / "config.json").read_text())["seed"] == 1  # the stale one is gone
    assert result.labels > 0 and result.curve


def test_without_keep_runs_nothing_is_left(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(_bench_rlhf_runs.tempfile, "tempdir", str(tmp_path))
    train(Job("Hopper-v5", "ppo", 1, 2048, 0))
    assert list(tmp_path.iterdir()) == []


def test_a_screen_takes_ppo_from_the_grid_it_is_compared_with(
    bench, tmp_path, monkeypatch, capsys
) -> None:
    before, screen = tmp_path / "before", tmp_path / "screen"
    before.mkdir(), screen.mkdir()
    argv = ["--quick", "--n-seeds", "2", "--labels", "100", "--mistake", "0.1"]
    for job in _cached(bench, [*argv, "--out", str(before)], before):
        if job.mode != "ppo":  # the screen's own runs; the earlier grid keeps only PPO's
            (before / f"{job.key}.json").rename(screen / f"{job.key}.json")
    monkeypatch.setattr(bench, "run_jobs", lambda *a, **k: pytest.fail("nothing is to run"))
    argv += ["--out", str(screen), "--baseline-from", str(before)]
    lines = _main(bench, monkeypatch, capsys, argv)
    assert lines[1].startswith("4 runs already in ")
    assert parse_figures(lines[-1])["ratio_Hopper"] == "0.53"  # the table above's figure
    with pytest.raises(SystemExit):
        _main(bench, monkeypatch, capsys, [*argv[:-1], str(tmp_path / "nowhere")])
    assert "--baseline-from " in capsys.readouterr().err


def test_arms_rlhf_runs_no_ppo_and_the_table_has_no_ratio_without_it(
    bench, tmp_path, monkeypatch, capsys
) -> None:
    """--arms rlhf: a screen's RLHF runs go first (its PPO later, or on another machine); the
    table shows them with no baseline and no ratio until PPO's result is there."""
    out, every = tmp_path / "out", tmp_path / "every"  # every: what each run would save
    out.mkdir(), every.mkdir()
    argv = ["--quick", "--n-seeds", "2", "--labels", "100", "--mistake", "0.1"]
    argv += ["--out", str(out), "--plot", str(tmp_path / "curves.png")]
    jobs = _cached(bench, argv, every)
    (kept,) = [job for job in jobs if job.mode != "ppo" and job.seed == 101]
    shutil.copy(every / f"{kept.key}.json", out)
    ran: list[tuple[str, int]] = []

    def fake_run_jobs(fn, work, parallel, describe, **_):
        for job, _, _ in work:
            ran.append((job.mode, job.seed))
            shutil.copy(every / f"{job.key}.json", out)  # as the run itself saves it
        return [load(out)[job.key] for job, _, _ in work]

    monkeypatch.setattr(bench, "run_jobs", fake_run_jobs)
    lines = _main(bench, monkeypatch, capsys, [*argv, "--arms", "rlhf"])
    assert ran == [("rlhf", 102)]  # neither PPO run
    assert lines[1].endswith("; 1 to run (2 of the other arm left out: --arms)")
    row = next(line for line in lines if line.startswith("Hopper-v5"))
    assert row.split()[5:9] == ["-", "80", "±", "42"]  # no PPO; RLHF's as with it
    assert parse_figures(lines[-1])["ratio_Hopper"] == "nan"
    lines = _main(bench, monkeypatch, capsys, argv)  # then PPO's: the screen has its ratio
    assert ran[1:] == [("ppo", 101), ("ppo", 102)]
    assert parse_figures(lines[-1])["ratio_Hopper"] == "0.53"
