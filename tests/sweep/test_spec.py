"""A sweep's SPEC and flags: checked against the real rlhf train flags, one line per mistake."""

from __future__ import annotations

import json
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from rlhf.cli import main
from rlhf.core.shell import install_extra
from rlhf.sweep.command import Sweep
from rlhf.sweep.driver import prepare
from rlhf.sweep.grid import cell_name
from rlhf.sweep.spec import SpecError
from tests.support.toy_env import ENV_ID
from tests.sweep.envs import register

GOOD = """
seeds = [1, 2]
setup = ["tests.sweep.envs:register"]

[train]
env-id = "rlhf-test/PointGoal-v0"
total-timesteps = 2048
num-steps = 256
num-minibatches = 4
query.segment-length = 10

[grid]
"query.total-labels" = [20, 40]
"""


def _spec(tmp_path: Path, text: str) -> str:
    path = tmp_path / "spec.toml"
    path.write_text(text)
    return str(path)


def _prepare(tmp_path: Path, text: str, **flags) -> tuple:
    return prepare(Sweep(spec=_spec(tmp_path, text), sweep_dir=str(tmp_path / "out"), **flags))


def _error(tmp_path: Path, text: str, **flags) -> str:
    with pytest.raises(SpecError) as info:
        _prepare(tmp_path, text, **flags)
    message = str(info.value)
    assert "\n" not in message
    return message


def test_a_good_spec_is_every_combination_with_the_seeds_last(tmp_path: Path) -> None:
    _, cells, root = _prepare(tmp_path, GOOD)
    assert root == tmp_path / "out"
    assert [c.name for c in cells] == [
        "query.total-labels=20__seed=1",
        "query.total-labels=20__seed=2",
        "query.total-labels=40__seed=1",
        "query.total-labels=40__seed=2",
    ]
    first = cells[0].config
    assert first.env_id == ENV_ID and first.total_timesteps == 2048 and first.ppo.num_steps == 256
    assert first.query.total_labels == 20 and first.seed == 1 and cells[3].config.seed == 2
    # The sweep's own settings: the cell's directory, synthetic labels, no progress bars.
    assert first.runs_dir == str((tmp_path / "out").resolve())
    assert first.run_name == cells[0].name and first.feedback == "synthetic" and not first.progress
    assert cells[1].group == cells[0].group == (("query.total-labels", 20),)


def test_flags_add_to_the_spec_and_win_over_its_keys(tmp_path: Path) -> None:
    _, cells, _ = _prepare(
        tmp_path,
        GOOD,
        grid=("learning-rate=1e-3,3e-4", "query.total-labels=[60]"),
        train=("teacher.beta=inf",),
        seeds=(7,),
    )
    assert [c.params for c in cells] == [
        (("query.total-labels", 60), ("learning-rate", 0.001), ("seed", 7)),
        (("query.total-labels", 60), ("learning-rate", 0.0003), ("seed", 7)),
    ]
    assert cells[0].config.ppo.learning_rate == 1e-3 and cells[0].config.teacher.beta == float(
        "inf"
    )


def test_field_paths_and_underscores_name_the_same_setting(tmp_path: Path) -> None:
    text = GOOD.replace("num-steps = 256", "ppo.num_steps = 256").replace(
        "num-minibatches", "--num_minibatches"
    )
    _, cells, _ = _prepare(tmp_path, text)
    assert cells[0].config.ppo.num_steps == 256 and cells[0].config.ppo.num_minibatches == 4


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (('"query.total-labels"', '"query.total-label"'), "[grid]: unknown key 'query.total-label'; did you mean query.total-labels?"),
        (("total-timesteps", "total-timestep"), "[train]: unknown key 'total-timestep'; did you mean total-timesteps?"),
        (("[train]", "learning-rat = 0.1\n[train]"), "spec.toml: unknown key 'learning-rat'; the keys are seeds, setup, train, grid"),
        (("[train]", "env-id = 'x'\n[train]"), "spec.toml: env-id must be under [train] or [grid]"),
        (("[train]", "[train]\nrun-name = 'x'"), "[train]: run-name is set by the sweep"),
        (("= [20, 40]", "= 20"), "[grid] query.total-labels must be a non-empty list of values"),
        (("= [20, 40]", "= [20, 20]"), "[grid] query.total-labels lists a value twice"),
        (("2048", '"lots"'), "[train] total-timesteps: 'lots' is not a value it takes"),
        (("seeds = [1, 2]", "seeds = [1, 1.5]"), "seeds must be a non-empty list of different integers"),
        (("[train]", "[train]\nseed = 3"), "seeds and seed are both given"),
        (("[train]", "[train]\nfeedback = 'human'"), "feedback human needs a person"),
        (("[grid]", "[grid]\ntotal-timesteps = [1]"), "total-timesteps is both in [train] and in [grid]"),
        (("2048", "0"), "cell query.total-labels=20__seed=1: --total-timesteps must be >= 1"),
        (("rlhf-test/PointGoal-v0", "rlhf-test/PointGoal-v9"), "cell query.total-labels=20__seed=1: "),
        (("segment-length = 10", "segment-length = 900"), "--query.segment-length 900 is longer than"),
        (("tests.sweep.envs:register", "tests.sweep.nowhere"), "setup tests.sweep.nowhere: ModuleNotFoundError"),
        (("seeds = [1, 2]", "seeds = [1, 2"), "spec.toml is not valid TOML: "),
    ],
)  # fmt: skip
def test_a_bad_spec_is_one_line_naming_the_bad_key(
    tmp_path: Path, change: tuple[str, str], expected: str
) -> None:
    assert change[0] in GOOD
    assert expected in _error(tmp_path, GOOD.replace(*change, 1))


def test_bad_flags_are_one_line_naming_the_flag(tmp_path: Path) -> None:
    assert "--grid 'seed'" in _error(tmp_path, GOOD, grid=("seed",))
    assert "unknown key 'learning_rat'; did you mean learning-rate?" in _error(
        tmp_path, GOOD, train=("learning_rat=1",)
    )
    with pytest.raises(SpecError, match="no SPEC: give a TOML file or --grid/--train/--seeds"):
        prepare(Sweep())
    with pytest.raises(SpecError, match="--sweep-dir is required without a SPEC file"):
        prepare(Sweep(grid=("seed=1,2",)))
    with pytest.raises(SpecError, match="no such SPEC file"):
        prepare(Sweep(spec=str(tmp_path / "missing.toml")))
    # Before Ray starts, which would refuse a negative --max-retries with a traceback.
    assert _error(tmp_path, GOOD, max_retries=-3) == "--max-retries must be >= 0"
    assert _error(tmp_path, GOOD, num_cpus=0) == "--num-cpus must be >= 1"


def test_the_command_line_prints_a_bad_key_as_one_line_and_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = _spec(tmp_path, GOOD.replace("num-minibatches", "num-minibatch"))
    with pytest.raises(SystemExit) as info:
        main(["sweep", spec, "--sweep-dir", str(tmp_path / "out")])
    assert info.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err == (
        "rlhf: error: spec.toml [train]: unknown key 'num-minibatch'; did you mean num-minibatches?"
    )
    assert not (tmp_path / "out").exists()
    with pytest.raises(SystemExit):
        main(["sweep", spec, "--sweepdir", "x"])
    assert capsys.readouterr().err.strip() == (
        "rlhf: error: unrecognized flag --sweepdir; did you mean --sweep-dir?"
    )


def test_without_ray_the_command_says_how_to_install_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # what an import finds when it is not there
    with pytest.raises(SystemExit) as info:
        main(["sweep", _spec(tmp_path, GOOD), "--sweep-dir", str(tmp_path / "out")])
    assert info.value.code == 2
    assert capsys.readouterr().err.strip() == (
        "rlhf: error: rlhf sweep needs Ray, which is not installed: " + install_extra("sweep")
    )


def test_cell_names_are_plain_deterministic_and_distinct() -> None:
    register()
    plain = (("query.total-labels", 200), ("teacher.beta", float("inf")), ("seed", 3))
    assert cell_name(plain) == "query.total-labels=200__teacher.beta=inf__seed=3"
    assert cell_name(plain) == cell_name(tuple(plain))  # same settings, same directory
    # A namespaced env id loses its '/', so the exact settings' hash keeps names apart.
    a = cell_name((("env-id", "ns/Env-v0"),))
    b = cell_name((("env-id", "ns-Env-v0"),))
    assert "/" not in a and a.startswith("env-id=ns-Env-v0~") and b == "env-id=ns-Env-v0"
    long = cell_name((("env-kwargs", '{"x": "' + "y" * 400 + '"}'),))
    assert len(long) < 200 and "/" not in long and ".." not in long
    assert cell_name(()) == "run"


def test_help_shows_every_sweep_flag_and_no_none_metavar(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from rlhf.cli import known_flags

    with pytest.raises(SystemExit) as info:
        main(["sweep", "--help"])
    assert info.value.code == 0
    text = capsys.readouterr().out
    assert "{None}" not in text and "``" not in text and "SPEC" in text
    for name in known_flags(Sweep) - {"--spec"}:  # SPEC is positional
        assert name in text, name


def test_a_cell_that_ran_on_an_earlier_target_catalogue_is_a_spec_error(tmp_path: Path) -> None:
    """Resuming it would learn another behaviour than its labels (rlhf.run.run_dir)."""
    from rlhf.config import Config, TeacherConfig
    from rlhf.config.presets import with_preset
    from rlhf.run.config_file import config_digest
    from rlhf.run.run_dir import create_run_dir
    from rlhf.sweep.grid import Cell
    from rlhf.sweep.worker import LAST_CHECKPOINT, Action, plan

    cfg = Config(
        runs_dir=str(tmp_path),
        run_name="cell",
        env_id="Hopper-v5",
        feedback="synthetic",
        teacher=TeacherConfig(target="hop"),
    )
    run = create_run_dir(with_preset(cfg)[0])  # as a cell's run stores it
    (run.root / "checkpoints" / LAST_CHECKPOINT).write_bytes(b"")
    cell = Cell("cell", (("seed", 0),), cfg)
    assert plan(cell)[0] is Action.RESUME
    data = json.loads(run.config.read_text())
    del data["target_catalogue"], data["sha256"]
    run.config.write_text(json.dumps({**data, "sha256": config_digest(data)}))
    with pytest.raises(SpecError, match=r"^cell cell: --resume .* target catalogue 1"):
        plan(cell)


def test_a_cell_that_ended_on_the_clock_resumes_when_the_spec_gives_it_more_time(
    tmp_path: Path,
) -> None:
    from rlhf.config import Config
    from rlhf.config.presets import with_preset
    from rlhf.run.run_dir import create_run_dir
    from rlhf.sweep.grid import Cell
    from rlhf.sweep.worker import LAST_CHECKPOINT, Action, plan

    cfg = Config(runs_dir=str(tmp_path), run_name="cell", feedback="synthetic", max_minutes=30)
    run = create_run_dir(with_preset(cfg)[0])
    (run.root / "checkpoints" / LAST_CHECKPOINT).write_bytes(b"")
    (run.root / "summary.json").write_text(json.dumps({"status": "finished"}))
    assert plan(Cell("cell", (), cfg))[0] is Action.SKIP
    for minutes in (60, 0):  # more time, or no limit
        more = replace(cfg, max_minutes=minutes)
        assert plan(Cell("cell", (), more))[0] is Action.RESUME
    with pytest.raises(SpecError, match=r"ran with max-minutes = 30\.0 and the spec now says 10:"):
        plan(Cell("cell", (), replace(cfg, max_minutes=10)))
