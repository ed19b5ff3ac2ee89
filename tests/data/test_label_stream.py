"""Lazy reading of a dataset (rlhf.data.stream) and reward fitting from the stream."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from rlhf.cli import main
from rlhf.config import ConfigError, RewardConfig
from rlhf.core.types import Answer, Pair
from rlhf.data.datasets import export_run
from rlhf.data.stream import LabelStream, batches
from rlhf.reward.fit import fit_lazy
from rlhf.store import LabelStore
from tests.support.segments import first_coordinate_segment

pq = pytest.importorskip("pyarrow.parquet")
pytest.importorskip("minari")


def _toy_dataset(root: Path, pairs: int, skips: int = 0, row_group_size: int = 4096) -> Path:
    """Random 10-step segments whose true reward is the first observation coordinate, labelled
    by the true returns (the first ``skips`` pairs skipped), exported as a dataset."""
    rng = np.random.default_rng(0)

    segments = [first_coordinate_segment(rng, physics_dim=2) for _ in range(2 * pairs)]
    made = [Pair(segments[2 * i], segments[2 * i + 1]) for i in range(pairs)]
    answers = [
        Answer.LEFT if p.left.true_return > p.right.true_return else Answer.RIGHT for p in made
    ]
    answers[:skips] = [Answer.SKIP] * skips
    LabelStore(root / "run" / "labels.sqlite").add_pairs_with_labels(made, answers, "synthetic")
    export_run(root / "run", root / "d", row_group_size=row_group_size)
    return root / "d"


@pytest.mark.parametrize("workers", [0, 2])
def test_the_stream_yields_every_label_once_per_epoch_shuffled(tmp_path: Path, workers) -> None:
    dataset = _toy_dataset(tmp_path, pairs=120, skips=7, row_group_size=25)
    assert pq.ParquetFile(dataset / "labels.parquet").num_row_groups == 5
    stream = LabelStream(dataset, buffer_size=16, seed=3)
    orders = []
    for epoch in range(2):
        stream.set_epoch(epoch)
        seen = [pair_id for batch in _seqs(stream, workers) for pair_id in batch]
        assert sorted(seen) == list(range(8, 121))  # every usable label once; skips never
        orders.append(seen)
    assert orders[0] != orders[1]  # reshuffled
    assert orders[0] != sorted(orders[0])  # not file order
    parts = {
        name: {seq for seq, _ in LabelStream(dataset, name, 0.2, 0.25, seed=3)}
        for name in ("train", "val", "test")
    }
    assert set().union(*parts.values()) == set(range(8, 121))
    assert sum(map(len, parts.values())) == 113  # disjoint
    assert 10 <= len(parts["test"]) <= 40 and len(parts["val"]) >= 10


def _seqs(stream: LabelStream, workers: int) -> list[list[int]]:
    """Label seqs per batch, through a DataLoader with ``workers`` processes."""
    import torch

    loader = torch.utils.data.DataLoader(
        stream, batch_size=10, num_workers=workers, collate_fn=_first
    )
    return list(loader)


def _first(batch: list) -> list[int]:
    return [seq for seq, _ in batch]


def test_a_stream_item_is_the_labelled_pair_bit_for_bit(tmp_path: Path) -> None:
    dataset = _toy_dataset(tmp_path, pairs=20)
    store = LabelStore(tmp_path / "run" / "labels.sqlite")
    for seq, pref in LabelStream(dataset, buffer_size=4):
        pair = store.get_pair(seq)  # one label per pair, both numbered from 1
        assert np.array_equal(pref.pair.left.obs, pair.left.obs)
        assert np.array_equal(pref.pair.right.qvel, pair.right.qvel)
        assert pref.mu == (1.0 if pair.left.true_return > pair.right.true_return else 0.0)
    batch = next(batches(LabelStream(dataset), batch_size=8))
    assert len(batch) == 8 and all(p.pair.left.obs.shape == (10, 3) for p in batch)


def test_a_reward_fitted_from_the_stream_ranks_held_out_pairs(tmp_path: Path) -> None:
    """Fit seeds 1-5 (torch 2.13.0): held-out accuracy 0.99-1.00, Pearson 0.99."""
    dataset = _toy_dataset(tmp_path, pairs=300, row_group_size=64)
    learner, result = fit_lazy(dataset, RewardConfig(), 0.2, seed=1, workers=0, cap=5000)
    assert 40 <= result.test_labels <= 80 and result.train_labels + result.test_labels < 300
    assert result.test_accuracy >= 0.85 and result.test_pearson >= 0.8, result
    assert learner.stats is not None and learner.stats.epochs >= 2


def test_cli_reward_fit_lazy_and_schema_1_refused(tmp_path: Path, capsys) -> None:
    dataset = _toy_dataset(tmp_path, pairs=60)
    main(["reward", "fit", str(dataset), "--lazy", "--out", str(tmp_path / "r.pt")])
    assert "held-out accuracy" in capsys.readouterr().out
    fit = torch.load(tmp_path / "r.pt", weights_only=True)["fit"]
    assert fit["lazy"] and fit["test_accuracy"] > 0.5 and fit["train_labels"] > 0
    info = (
        (dataset / "dataset.json").read_text().replace('"schema_version": 3', '"schema_version": 1')
    )
    (dataset / "dataset.json").write_text(info)
    with pytest.raises(ConfigError, match="reading it lazily needs schema 2"):
        LabelStream(dataset)
