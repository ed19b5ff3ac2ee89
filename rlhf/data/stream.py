"""A dataset's labels read lazily from disk, as a torch ``IterableDataset``.

:class:`LabelStream` reads ``labels.parquet`` one row group at a time and, for each row group,
only the Minari episodes its labels name (a label references its segments by episode id in the
labels file itself, so ``pairs.parquet`` is not needed). Labels pass through a shuffle buffer of
``buffer_size``, so memory holds one row group plus the buffer, never the dataset.

Every usable label (skips are never trained on) is yielded exactly once per pass, as
``(seq, Preference)``. With a ``DataLoader`` of several workers, worker k reads row groups
k, k + n, ...: together they still yield each label once. The order changes with
:meth:`LabelStream.set_epoch` (seeded, so a pass is reproducible).

A label belongs to one ``part``: "test" (a ``test_fraction`` share), "val" (a ``val_fraction``
share of the rest) or "train", decided by (seed, seq) alone, so every pass and every worker
agree on it without a list of ids in memory. Needs a schema 2 dataset.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

import numpy as np
import torch

from rlhf.config import ConfigError
from rlhf.core.types import Answer, Pair, Preference
from rlhf.data import checks
from rlhf.data.minari_segments import SegmentReader
from rlhf.data.reading import pyarrow, read_info, read_table

Part = Literal["train", "val", "test", "all"]


def part_of(seq: int, seed: int, test_fraction: float, val_fraction: float) -> str:
    """Which part label ``seq`` falls in; depends on (seq, seed) only."""
    draw = np.random.default_rng([seed, seq, 0x1AB]).random()
    if draw < test_fraction:
        return "test"
    # The rest of [test_fraction, 1) is split again, so val_fraction is a share of non-test labels.
    return "val" if draw < test_fraction + val_fraction * (1 - test_fraction) else "train"


class LabelStream(torch.utils.data.IterableDataset):
    """Labels of a dataset on disk, shuffled within a buffer, read on demand.

    Args:
        dataset: a dataset directory written by ``rlhf export`` (schema 2).
        part: which labels to yield (see the module docstring); "all" for every one.
        test_fraction, val_fraction: shares of the parts.
        seed: seeds the parts and the shuffling.
        buffer_size: labels held for shuffling (1: file order).
    """

    def __init__(
        self,
        dataset: Path,
        part: Part = "all",
        test_fraction: float = 0.0,
        val_fraction: float = 0.0,
        seed: int = 0,
        buffer_size: int = 1024,
    ) -> None:
        info = read_info(dataset)
        if info.get("schema_version", 1) < 2:
            raise ConfigError(
                f"{dataset} has schema {info.get('schema_version', 1)}; reading it lazily needs"
                " schema 2: rlhf import it, then rlhf export it again"
            )
        self.dataset = dataset
        self.part = part
        self.fractions = (test_fraction, val_fraction)
        self.seed = seed
        self.buffer_size = max(1, buffer_size)
        self.epoch = 0
        self._index = read_table(dataset, "segments")  # one small row per segment, no arrays

    def set_epoch(self, epoch: int) -> None:
        """Reshuffle: pass ``epoch`` yields the same labels in another order."""
        self.epoch = epoch

    def _file(self) -> Any:
        """labels.parquet opened (its footer read), or one line naming it."""
        pa, path = pyarrow(), self.dataset / "labels.parquet"
        try:
            return pa.parquet.ParquetFile(path)
        except (pa.ArrowException, OSError, ValueError) as exc:
            gist = " ".join(str(exc).split())[:160]
            raise ConfigError(f"{path} is not a readable Parquet file ({gist})") from None

    def _row_groups(self) -> range:
        worker = torch.utils.data.get_worker_info()
        groups = self._file().num_row_groups
        if worker is None:
            return range(groups)
        return range(worker.id, groups, worker.num_workers)

    def _group(self, file: Any, group: int, episodes: set[int]) -> list[dict[str, Any]]:
        """One row group's labels, checked as they are read (the file is never read whole)."""
        path, pa = self.dataset / "labels.parquet", pyarrow()
        try:
            rows = file.read_row_group(group).to_pylist()
        except (pa.ArrowException, OSError, ValueError) as exc:
            gist = " ".join(str(exc).split())[:160]
            raise ConfigError(f"{path}: row group {group} cannot be read ({gist})") from None
        checks.check_rows(path, rows, checks.spec_of("labels", 2))
        checks.check_answers(path, rows)
        for row in rows:
            for side in ("left", "right"):
                if row[f"{side}_episode"] not in episodes:
                    raise ConfigError(
                        f"{path}: seq {row['seq']}: {side}_episode {row[f'{side}_episode']} is"
                        " not an episode of segments.parquet"
                    )
        return rows

    def _labels(self) -> Iterator[tuple[int, Preference]]:
        """The part's usable labels in file order, one row group read at a time."""
        by_episode = {row["episode_id"]: row["id"] for row in self._index}
        reader = SegmentReader(self.dataset, self._index)
        file = self._file()
        for group in self._row_groups():
            rows = [r for r in self._group(file, group, set(by_episode)) if self._wanted(r)]
            wanted = [by_episode[r[f"{s}_episode"]] for r in rows for s in ("left", "right")]
            segments = reader.get(wanted)
            for row in rows:
                left = segments[by_episode[row["left_episode"]]]
                right = segments[by_episode[row["right_episode"]]]
                yield row["seq"], Preference(Pair(left, right), Answer(row["answer"]).mu)  # type: ignore[arg-type]

    def _wanted(self, row: dict[str, Any]) -> bool:
        if Answer(row["answer"]).mu is None:
            return False
        return self.part == "all" or part_of(row["seq"], self.seed, *self.fractions) == self.part

    def __iter__(self) -> Iterator[tuple[int, Preference]]:
        worker = torch.utils.data.get_worker_info()
        rng = np.random.default_rng([self.seed, self.epoch, 0 if worker is None else worker.id])
        buffer: list[tuple[int, Preference]] = []
        for item in self._labels():
            if len(buffer) < self.buffer_size:
                buffer.append(item)
                continue
            # Hand out a random buffered label and keep the new one in its place.
            i = int(rng.integers(len(buffer)))
            buffer[i], item = item, buffer[i]
            yield item
        for i in rng.permutation(len(buffer)):
            yield buffer[i]


def batches(stream: LabelStream, batch_size: int, workers: int = 0) -> Iterator[list[Preference]]:
    """One pass over ``stream`` in lists of ``batch_size`` preferences (``workers`` processes)."""
    loader = torch.utils.data.DataLoader(
        stream, batch_size=batch_size, num_workers=workers, collate_fn=_preferences
    )
    yield from loader


def _preferences(batch: list[tuple[int, Preference]]) -> list[Preference]:
    return [pref for _, pref in batch]
