"""scripts/bench_later_labels.py: the figures it reads off a run's labels, and its refusals."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from rlhf.config import ConfigError, QueryConfig, TeacherConfig
from rlhf.run.runner import run
from rlhf.store.label_store import LabelStore
from rlhf.sweep.spec import SpecError
from tests.support.helpers import tiny_config
from tests.support.toy_env import ENV_ID

SCRIPTS = str(Path(__file__).resolve().parents[2] / "scripts")
if SCRIPTS not in sys.path:  # as when run: bench_rlhf sits beside it
    sys.path.insert(0, SCRIPTS)
import bench_later_labels as bench  # noqa: E402


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Two small runs of the toy env with 60 labels each: a perfect teacher and one that
    answers every pair the wrong way round."""
    root = tmp_path_factory.mktemp("runs")
    out = {}
    for name, mistake in (("perfect", 0.0), ("contrary", 1.0)):
        teacher, query = TeacherConfig(mistake=mistake), QueryConfig(total_labels=60)
        kw = dict(run_name=name, total_timesteps=2048, seed=1, teacher=teacher, query=query)
        run(tiny_config(root, ENV_ID, **kw))
        out[name] = root / name
    return out


def test_the_later_labels_agreement_reads_the_teachers_mistakes(runs: dict[str, Path]) -> None:
    for name, expected in (("perfect", 1.0), ("contrary", 0.0)):
        prefs = LabelStore(runs[name] / "labels.sqlite").preferences()
        assert len(prefs) == 60
        assert bench.agreement(prefs[40:]) == expected


def test_a_reward_fitted_to_contrary_answers_orders_later_pairs_the_wrong_way(
    runs: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    """The figure measures the reward against the truth, not against the labels: answers that
    are all wrong teach a reward that is wrong on the later pairs too."""
    perfect = bench._run_row(runs["perfect"], ["reward_model.weight_decay=0"], 2 / 3, 2)
    contrary = bench._run_row(runs["contrary"], ["reward_model.weight_decay=0"], 2 / 3, 2)
    assert all(0 <= a <= 1 for a in perfect + contrary)
    assert min(perfect) > max(contrary), (perfect, contrary)
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("perfect: fit on the first 40 labels, scored on the 20 after them")
    assert "--set reward_model.weight_decay=0" in lines[2]


def test_only_reward_settings_and_enough_labels_are_taken(runs: dict[str, Path]) -> None:
    with pytest.raises(SpecError, match=r"^--set query\.total_labels: only reward_model\.\*"):
        bench._run_row(runs["perfect"], ["query.total_labels=5"], 2 / 3, 1)
    with pytest.raises(ConfigError, match=r"60 labels are too few to split at --first 0\.999"):
        bench._run_row(runs["perfect"], ["reward_model.weight_decay=0"], 0.999, 1)
