"""A hostile user's probe of the command line: every bad command is exit 2, one line, no traceback.

Each case is a command as someone would type it: flags out of range or not numbers at all, run
names that leave --runs-dir or break a listing, and files that are truncated, foreign or edited
by hand (dataset.json, the Parquet files, the Minari episodes) handed to ``rlhf import``,
``rlhf reward fit`` and ``--labels-from``. Every one must end with exit code 2 and exactly one
line on stderr starting ``rlhf: error:``, and leave nothing in the runs directory (where the
import targets go too), so that the corrected command works on the first retry.

The commands run in this process (``rlhf.cli.main``), so the whole list takes seconds. Training
and serving are replaced by a failure: a command that gets that far was accepted, which is the
bug this file looks for.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import torch

from rlhf.cli import main
from rlhf.core.types import Answer, Pair
from rlhf.data.datasets import export_run
from rlhf.store import LabelStore
from tests.support.segments import first_coordinate_segment

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

TRAIN = ["train", "--env-id", "Pendulum-v1", "--feedback", "synthetic", "--no-progress"]


@pytest.fixture(scope="module")
def sources(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``run/``: a label store of 12 labelled pairs; ``good/``: its export."""
    root = tmp_path_factory.mktemp("sources")
    rng = np.random.default_rng(0)
    made = [Pair(first_coordinate_segment(rng), first_coordinate_segment(rng)) for _ in range(12)]
    answers = [
        Answer.LEFT if p.left.true_return > p.right.true_return else Answer.RIGHT for p in made
    ]
    LabelStore(root / "run" / "labels.sqlite").add_pairs_with_labels(made, answers, "synthetic")
    export_run(root / "run", root / "good")
    return root


# -- ways to spoil a dataset ------------------------------------------------------------------------
def _info(**changes: object) -> Callable[[Path], None]:
    def edit(d: Path) -> None:
        info = json.loads((d / "dataset.json").read_text())
        (d / "dataset.json").write_text(json.dumps(info | changes))

    return edit


def _rows(name: str, change: Callable[[dict], dict]) -> Callable[[Path], None]:
    def edit(d: Path) -> None:
        rows = pq.read_table(d / f"{name}.parquet").to_pylist()
        pq.write_table(pa.Table.from_pylist([change(r) for r in rows]), d / f"{name}.parquet")

    return edit


def _bytes(name: str, data: bytes | None = None, keep: int | None = None) -> Callable[[Path], None]:
    def edit(d: Path) -> None:
        file = d / name
        file.write_bytes(file.read_bytes()[:keep] if data is None else data)

    return edit


def _minari(edit_file: Callable[[Path], None], suffix: str) -> Callable[[Path], None]:
    def edit(d: Path) -> None:
        for path in sorted((d / "minari").rglob(f"*{suffix}")):
            edit_file(path)

    return edit


def _drop(column: str) -> Callable[[dict], dict]:
    return lambda r: {k: v for k, v in r.items() if k != column}


SPOILED: dict[str, Callable[[Path], None]] = {
    "no-dataset-json": lambda d: (d / "dataset.json").unlink(),
    "json-garbage": _bytes("dataset.json", b"{nope"),
    "json-a-list": _bytes("dataset.json", b"[1, 2]"),
    "json-deep": _bytes("dataset.json", b"[" * 100_000 + b"]" * 100_000),
    "json-not-utf8": _bytes("dataset.json", b'{"format": "\xff"}'),
    "wrong-format": _info(format="csv"),
    "schema-a-string": _info(schema_version="3"),
    "schema-a-list": _info(schema_version=[3]),
    "schema-negative": _info(schema_version=-1),
    "schema-newer": _info(schema_version=99),
    "counts-a-string": _info(counts="many"),
    "count-a-string": _info(counts={"labels": "x"}),
    "env-id-a-list": _info(env_id=[1]),
    "env-kwargs-a-list": _info(env_kwargs=[1]),
    "task-a-number": _info(task=5),
    "scale-a-string": _info(rating_scale="seven"),
    "scale-levels-wrong": _info(rating_scale={"levels": 3, "names": ["a", "b"]}),
    "labels-truncated": _bytes("labels.parquet", keep=100),
    "labels-garbage": _bytes("labels.parquet", b"garbage" * 50),
    "labels-empty": _bytes("labels.parquet", b""),
    "labels-missing": lambda d: (d / "labels.parquet").unlink(),
    "labels-a-directory": lambda d: (
        (d / "labels.parquet").unlink(),
        (d / "labels.parquet").mkdir(),
    ),
    "pairs-garbage": _bytes("pairs.parquet", b"PAR1garbagePAR1"),
    "segments-truncated": _bytes("segments.parquet", keep=300),
    "ratings-garbage": _bytes("ratings.parquet", b"x"),
    "answer-sideways": _rows("labels", lambda r: r | {"answer": "sideways"}),
    "answer-a-number": _rows("labels", lambda r: r | {"answer": 3}),
    "answer-null": _rows("labels", lambda r: r | {"answer": None}),
    "label-of-no-pair": _rows("labels", lambda r: r | {"pair_id": 999} if r["seq"] == 1 else r),
    "label-twice": _rows("labels", lambda r: r | {"pair_id": 1}),
    "no-answer-column": _rows("labels", _drop("answer")),
    "created-at-text": _rows("labels", lambda r: r | {"created_at": "yesterday"}),
    "segment-id-text": _rows("segments", lambda r: r | {"id": str(r["id"])}),
    "segment-length-wrong": _rows("segments", lambda r: r | {"length": 3}),
    "episode-out-of-range": _rows("segments", lambda r: r | {"episode_id": r["episode_id"] + 1000}),
    "pair-of-no-segment": _rows("pairs", lambda r: r | {"left_segment": 999}),
    "pair-segment-null": _rows("pairs", lambda r: r | {"left_segment": None}),
    "pair-kind-odd": _rows("pairs", lambda r: r | {"kind": "triple"}),
    "minari-missing": lambda d: shutil.rmtree(d / "minari"),
    "minari-truncated": _minari(lambda p: p.write_bytes(p.read_bytes()[:50]), ".arrow"),
    "minari-metadata-garbage": _minari(lambda p: p.write_text("{"), ".json"),
}
"""Each a way a dataset arrives broken: a name, and what it does to a good dataset."""

FOR_FIT = (
    "json-a-list",
    "schema-a-string",
    "count-a-string",
    "labels-truncated",
    "labels-missing",
    "pairs-garbage",
    "ratings-garbage",
    "answer-sideways",
    "label-of-no-pair",
    "segment-id-text",
    "minari-truncated",
    "minari-metadata-garbage",
    "pair-segment-null",
)
"""The spoiled datasets also handed to rlhf reward fit."""

FOR_LABELS_FROM = (
    "json-a-list",
    "counts-a-string",
    "env-kwargs-a-list",
    "labels-garbage",
    "segments-truncated",
    "answer-sideways",
    "answer-a-number",
    "label-of-no-pair",
    "minari-truncated",
)
"""The spoiled datasets also handed to rlhf train --labels-from."""


# -- the commands ------------------------------------------------------------------------------------
BAD_TRAIN_FLAGS = [
    ["--seed", "-1"],
    ["--seed", str(2**64)],
    ["--seed", "abc"],
    ["--seed", "1.5"],
    ["--total-timesteps", "99999999999999999999999"],
    ["--total-timesteps", "0"],
    ["--total-timesteps", "1e6"],
    ["--reward-model.learning-rate", "nan"],
    ["--reward-model.learning-rate", "-1"],
    ["--reward-model.learning-rate", "inf"],
    ["--reward-model.weight-decay", "-1"],
    ["--reward-model.weight-decay", "nan"],
    ["--reward-model.hidden-sizes", "-4"],
    ["--reward-model.hidden-sizes", "0"],
    ["--reward-model.hidden-sizes", "64", "0"],
    ["--reward-model.hidden-sizes", "100000000"],
    ["--reward-model.ensemble-size", "0"],
    ["--reward-model.ensemble-size", "100000"],
    ["--reward-model.batch-size", str(2**63)],
    ["--reward-model.dropout", "nan"],
    ["--reward-model.label-noise", "1"],
    ["--reward-model.retrain-growth", "-1"],
    ["--reward-model.patience", "0"],
    ["--reward-model.max-epochs", "10000000000"],
    ["--query.segment-seconds", "inf"],
    ["--query.segment-seconds", "nan"],
    ["--query.segment-seconds", "0"],
    ["--query.initial-fraction", "nan"],
    ["--query.total-labels", "-1"],
    ["--query.total-labels", "99999999999999"],
    ["--query.pool-size", "10000000000000"],
    ["--query.oversample", "0"],
    ["--query.replay-share", "2"],
    ["--query.ask-until", "0"],
    ["--query.ask-until", "1.5"],
    ["--teacher.beta", "nan"],
    ["--teacher.beta", "-inf"],
    ["--teacher.mistake", "1.5"],
    ["--teacher.gamma", "0"],
    ["--teacher.skip-threshold", "inf"],
    ["--teacher.equal-threshold", "-1"],
    ["--learning-rate", "inf"],
    ["--learning-rate", "0"],
    ["--ent-coef", "nan"],
    ["--vf-coef", "-1"],
    ["--target-kl", "-1"],
    ["--init-log-std", "nan"],
    ["--init-log-std", "100"],
    ["--end-margin", "inf"],
    ["--restart-at", "1"],
    ["--restart-at", "nan"],
    ["--gamma", "1.5"],
    ["--clip-coef", "inf"],
    ["--max-grad-norm", "nan"],
    ["--num-steps", "99999999999999"],
    ["--hidden-size", "0"],
    ["--num-envs", "100000"],
    ["--torch-threads", "0"],
    ["--checkpoint-minutes", "inf"],
    ["--max-minutes", "-1"],
    ["--max-minutes", "nan"],
    ["--checkpoint-every", "-1"],
    ["--policy-clip-every", "-1"],
    ["--port", "70000"],
    ["--finish-grace", "inf"],
    ["--overlap", "nan"],
    ["--video.width", "100000"],
    ["--video.fps", "inf"],
    ["--video.ready-ahead", "0"],
    ["--video.render-processes", "1000"],
    ["--ratings.levels", "11"],
    ["--ratings.sharpness", "inf"],
    ["--data.age-lambda", "nan"],
    ["--data.grade-beta", "inf"],
    ["--data.min-grade", "100"],
    ["--data.demo-fraction", "1.5"],
    ["--sac.tau", "nan"],
    ["--sac.alpha", "-1"],
    ["--sac.q-lr", "inf"],
    ["--sac.buffer-size", "99999999999999"],
    ["--sac.gamma", "1"],
    ["--sac.entropy-k", "0"],
    ["--run-name", "."],
    ["--run-name", ".."],
    ["--run-name", "a\nb"],
    ["--run-name", "a\tb"],
    ["--run-name", ""],
    ["--run-name", " "],
    ["--run-name", " lead"],
    ["--run-name", "x" * 300],
    ["--run-name", "a\x7fb"],
    ["--run-name", "a\x1bb"],
    ["--run-name", "a\u202eb"],
    ["--run-name=-x"],
    ["--run-name", "a/b"],
    ["--run-name", "/abs"],
    ["--env-kwargs", "[1]"],
    ["--env-kwargs", '{"a": NaN}'],
    ["--env-id", "Pendulum-v1", "--env-kwargs", '{"g": "x"}'],  # fails in the physics
    ["--reward-model", "/nonexistent.pt"],
    ["--labels-from", "/nonexistent"],
    ["--resume", "/nonexistent"],
    ["--no-such-flag", "1"],
]

Case = tuple[str, Callable[[Path, Callable[[str], str]], list[str]]]


def _cases() -> list[Case]:
    """(id, command maker): the maker gets the runs directory and ``spoil(name)``, which makes a
    spoiled copy of the good dataset and returns its path ("good" for an untouched one)."""
    cases: list[Case] = []
    for flags in BAD_TRAIN_FLAGS:
        cases.append(("train " + " ".join(map(repr, flags)), lambda r, s, f=flags: _train(r, f)))
    for name in SPOILED:
        cases.append((f"import {name}", lambda r, s, n=name: ["import", s(n), str(r / "imp")]))
    for name in FOR_FIT:
        cases.append((f"reward fit {name}", lambda r, s, n=name: _fit(r, s(n))))
    for name in FOR_LABELS_FROM:
        cases.append(
            (f"--labels-from {name}", lambda r, s, n=name: _train(r, ["--labels-from", s(n)]))
        )
    for flags in (
        ["--test-fraction", "nan"],
        ["--test-fraction", "1"],
        ["--seed", "-1"],
        ["--seed", str(2**64)],
        ["--workers", "-1"],
        ["--max-held-out", "0"],
        ["--reward-model.learning-rate", "nan"],
        ["--reward-model.learning-rate", "-1"],
        ["--reward-model.weight-decay", "-1"],
        ["--reward-model.hidden-sizes", "-4"],
        ["--reward-model.hidden-sizes", "0"],
        ["--reward-model.ensemble-size", "0"],
        ["--reward-model.batch-size", "0"],
    ):
        cases.append(("reward fit " + " ".join(flags), lambda r, s, f=flags: _fit(r, s("good"), f)))
    cases += [
        ("reward fit --out a directory", lambda r, s: [*_fit(r, s("good")), "--out", str(r)]),
        ("reward fit --out nowhere", lambda r, s: [*_fit(r, s("good")), "--out", str(r / "x/y")]),
        ("import into a file", lambda r, s: ["import", s("good"), s("good") + "/dataset.json"]),
        ("import a run", lambda r, s: ["import", str(Path(s("good")).parent / "run"), str(r / "i")]),
        ("export into a file", lambda r, s: ["export", s("run"), s("good") + "/dataset.json"]),
        ("train --runs-dir a file", lambda r, s: [*TRAIN, "--runs-dir", s("good") + "/dataset.json"]),
        ("runs list --max-age-days nan", lambda r, s: ["runs", "clean", "--runs-dir", str(r), "--max-age-days", "nan"]),
        ("runs list --min-labels -1", lambda r, s: ["runs", "list", "--runs-dir", str(r), "--min-labels", "-1"]),
        ("runs list of a file", lambda r, s: ["runs", "list", "--runs-dir", s("good") + "/dataset.json"]),
        ("serve --port 70000", lambda r, s: ["serve", "--run", s("run"), "--port", "70000"]),
        ("serve --video.fps nan", lambda r, s: ["serve", "--run", s("run"), "--video.fps", "nan"]),
        ("serve --video.width 0", lambda r, s: ["serve", "--run", s("run"), "--video.width", "0"]),
        ("record --episodes 0", lambda r, s: ["record", s("run"), "--episodes", "0"]),
        ("record --seed -1", lambda r, s: ["record", s("run"), "--seed", "-1"]),
        ("record --video.height 99999", lambda r, s: ["record", s("run"), "--video.height", "99999"]),
    ]  # fmt: skip
    return cases


def _train(runs: Path, flags: list[str]) -> list[str]:
    return [*TRAIN, "--runs-dir", str(runs), *flags]


def _fit(runs: Path, dataset: str, flags: list[str] = ()) -> list[str]:  # type: ignore[assignment]
    return ["reward", "fit", dataset, "--out", str(runs / "reward.pt"), *flags]


CASES = _cases()


def _refuse_to_start(*args: object, **kwargs: object) -> None:
    raise AssertionError("accepted: the command got as far as training or serving")


@pytest.fixture
def accepted_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    """A command that passes every check fails loudly instead of training or serving."""
    import rlhf.feedback.session
    import rlhf.run.runner

    monkeypatch.setattr(rlhf.run.runner, "_live", _refuse_to_start)
    monkeypatch.setattr(rlhf.feedback.session, "serve_run", _refuse_to_start)


@pytest.mark.parametrize(("label", "command"), CASES, ids=[c[0] for c in CASES])
def test_a_bad_command_is_one_line_exit_2_and_leaves_nothing(
    label: str,
    command: Callable[[Path, Callable[[str], str]], list[str]],
    sources: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    accepted_fails: None,
) -> None:
    runs = tmp_path / "runs"
    runs.mkdir()
    spoiled = tmp_path / "datasets"

    def spoil(name: str) -> str:
        if name in ("good", "run"):
            return str(sources / name)
        shutil.copytree(sources / "good", spoiled / name)
        SPOILED[name](spoiled / name)
        return str(spoiled / name)

    args = command(runs, spoil)
    with pytest.raises(SystemExit) as exit_:
        main(args)
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    assert exit_.value.code == 2, err
    assert len(lines) == 1 and lines[0].startswith("rlhf: error: "), err
    assert "Traceback" not in err
    assert os.listdir(runs) == []  # no run directory, no store of a failed import, no reward.pt
    assert not (sources / "good" / "dataset.json").is_dir()


def test_the_probe_is_the_size_of_a_hostile_users() -> None:
    """About a hundred commands, as the probe that found these had (102)."""
    assert len(CASES) >= 100
    assert len({label for label, _ in CASES}) == len(CASES)


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_a_run_that_dies_at_startup_leaves_no_directory_and_the_name_works_again(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], accepted_fails: None
) -> None:
    """--device cuda on a machine without it fails after the run directory was made (the
    trainer is built then): the directory goes, so the corrected command can keep the name."""
    args = [*_train(tmp_path, ["--run-name", "first"]), "--total-timesteps", "64"]
    args += ["--num-steps", "32", "--num-minibatches", "2", "--query.total-labels", "2"]
    with pytest.raises(SystemExit) as exit_:
        main([*args, "--device", "cuda"])
    assert exit_.value.code == 2
    assert "--device cuda" in capsys.readouterr().err
    assert os.listdir(tmp_path) == []
    with pytest.raises(AssertionError, match="accepted"):  # got as far as training this time
        main([*args, "--device", "cpu"])
    assert (tmp_path / "first" / "config.json").is_file()
