"""A dataset's segments as a Minari dataset (Farama's standard for offline RL data).

Layout: ``OUT/minari/rlhf/segments-v0/data`` is a Minari dataset (``data_format="arrow"``, so no
h5py is needed) with **one episode per stored segment**, episode ids 0, 1, ... in the order of
``segments.parquet`` (which maps each rlhf segment id to its episode). One episode per segment,
rather than episodes stitched from consecutive segments, keeps every segment exact (segments of
one rollout may overlap) and lets a reader fetch just the segments a label names. Each episode of
T steps holds:

- ``observations``: T + 1 raw observations (float32). Minari wants the observation after the
  last step too, which a segment does not keep: observation T repeats observation T - 1. Readers
  of a segment take the first T.
- ``actions`` (float32, as applied to the env) and ``rewards`` (the env's true reward, float32).
- ``terminations``: True on the last step when the episode ended inside the segment; its last
  ``absorbing`` steps (``segments.parquet``) are then padding in the absorbing state (zero
  observations, actions and rewards). ``truncations``: True on the last step otherwise (the
  window was cut out of a longer episode).
- ``infos["qpos"]``, ``infos["qvel"]``: the MuJoCo state before each step (float64, T + 1 rows,
  the last repeated), which replays the segment. A state of width 0 (an env without it) is
  left out of ``infos``.

The dataset's env spec is the run's env with its ``--env-kwargs`` (a goal env with rlhf's
flattening wrapper, as its segments saw it), so Minari's ``recover_environment()`` makes it.

Reading is lazy: :class:`SegmentReader` loads only the episodes asked for.
"""

from __future__ import annotations

import contextlib
import os
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from unittest import mock

import numpy as np

from rlhf.config import ConfigError
from rlhf.core.shell import missing_extra
from rlhf.core.types import Segment
from rlhf.data.checks import check_segment

MINARI_ID = "rlhf/segments-v0"
MINARI_ROOT = "minari"
"""Folder inside a dataset that serves as ``MINARI_DATASETS_PATH`` for the segments."""


def minari_path(dataset: Path) -> Path:
    """Where the Minari dataset of ``dataset`` lives (what ``minari.MinariDataset`` opens)."""
    return dataset / MINARI_ROOT / MINARI_ID / "data"


def _minari() -> Any:
    try:
        import minari
        from minari.data_collector import EpisodeBuffer  # noqa: F401
    except ImportError:
        raise ConfigError(missing_extra("datasets need minari", "data")) from None
    return minari


@contextlib.contextmanager
def _datasets_root(path: Path) -> Iterator[None]:
    """``MINARI_DATASETS_PATH`` set for one call only (Minari reads it to place new datasets)."""
    old = os.environ.get("MINARI_DATASETS_PATH")
    os.environ["MINARI_DATASETS_PATH"] = str(path.resolve())
    try:
        yield
    finally:
        if old is None:
            os.environ.pop("MINARI_DATASETS_PATH", None)
        else:
            os.environ["MINARI_DATASETS_PATH"] = old


def _episode(index: int, seg: Segment) -> Any:
    from minari.data_collector import EpisodeBuffer

    def plus_one(a: np.ndarray) -> np.ndarray:
        return np.concatenate([a, a[-1:]])

    last = np.zeros(len(seg), bool)
    last[-1] = True
    ended = seg.absorbing > 0
    return EpisodeBuffer(
        id=index,
        observations=plus_one(seg.obs),
        actions=seg.actions,
        rewards=seg.true_rewards,
        terminations=last & ended,
        truncations=last & (not ended),
        # Zero-width infos break Minari's Arrow reader: a state of width 0 is left out.
        infos={k: plus_one(getattr(seg, k)) for k in ("qpos", "qvel") if getattr(seg, k).shape[1]}
        or None,
    )


def write_segments(
    out: Path,
    segments: list[Segment],
    env_id: str | None,
    env_kwargs: dict[str, Any] | None = None,
) -> None:
    """Write ``segments`` as Minari episodes 0..N-1 under ``out`` (nothing when there are none).

    The dataset keeps the env spec of ``env_id`` with ``env_kwargs`` (the env the run made), so
    ``minari.load_dataset(...).recover_environment()`` makes it again; where this machine cannot
    make that env (not installed, or no longer registered) the dataset has no env spec.
    """
    if not segments:
        return
    minari = _minari()
    import gymnasium as gym

    first = segments[0]
    shapes = {
        (s.obs.shape[1], s.actions.shape[1], s.qpos.shape[1], s.qvel.shape[1]) for s in segments
    }
    if len(shapes) > 1:
        raise ConfigError(f"the run's segments differ in shape {sorted(shapes)}; cannot export")
    unbounded = dict(low=-np.inf, high=np.inf, dtype=np.float32)
    env = _made_env(env_id, env_kwargs)
    try:
        with _datasets_root(out / MINARI_ROOT), warnings.catch_warnings(), _size_once(minari):
            warnings.simplefilter("ignore", UserWarning)  # author, permalink: not known here
            written = minari.create_dataset_from_buffers(
                MINARI_ID,
                [_episode(i, s) for i, s in enumerate(segments)],
                env=env,  # its spec, kwargs included; the spaces are the segments' own
                observation_space=gym.spaces.Box(shape=first.obs.shape[1:], **unbounded),
                action_space=gym.spaces.Box(shape=first.actions.shape[1:], **unbounded),
                algorithm_name="rlhf",
                description=f"Labelled segments of {env_id} (one episode per segment), from rlhf",
                data_format="arrow",
            )
    finally:
        if env is not None:
            env.close()
    written.storage.update_metadata({"dataset_size": written.storage.get_size()})


def _made_env(env_id: str | None, kwargs: dict[str, Any] | None) -> Any:
    """The run's env as ``rlhf train`` makes it (a goal env flattened, as its segments are), for
    its spec; None where it cannot be made here, or its spec cannot be written as JSON (an env
    registered with a callable entry point): the dataset then has no env spec."""
    if not env_id:
        return None
    import gymnasium as gym

    from rlhf.envs import EnvError, make_env

    try:
        env = make_env(env_id, kwargs)
    except (EnvError, gym.error.Error, ImportError):  # unknown here, or a missing dependency
        return None
    try:
        env.spec.to_json()
    except (AttributeError, TypeError, ValueError):
        env.close()
        return None
    return env


@contextlib.contextmanager
def _size_once(minari: Any) -> Iterator[None]:
    """Skip the dataset-size scan Minari 0.5 runs after *every* episode it writes.

    That scan globs the whole dataset, so writing N episodes costs O(N^2) (700 labels took 51 s,
    almost all of it there); :func:`write_segments` measures the size once at the end instead.
    """
    storage = getattr(getattr(minari, "dataset", None), "minari_storage", None)
    cls = getattr(storage, "MinariStorage", None)
    if cls is None or not hasattr(cls, "get_size"):  # another Minari: slow, still correct
        yield
        return
    with mock.patch.object(cls, "get_size", return_value=0.0):
        yield


class SegmentReader:
    """Segments of a dataset read from its Minari episodes on demand.

    Args:
        dataset: the dataset directory.
        index: ``segments.parquet`` rows (id, episode_id, env_id, start_step, absorbing, length).
    """

    def __init__(self, dataset: Path, index: list[dict[str, Any]]) -> None:
        self.rows = {row["id"]: row for row in index}
        self._minari: Any = None
        if index:
            minari = _minari()
            path = minari_path(dataset)
            if not path.is_dir():
                raise ConfigError(f"{dataset} has no Minari dataset at {path}")
            self.path = path
            with self._unreadable():
                self._minari = minari.MinariDataset(str(path))
                self.episodes = int(self._minari.total_episodes)

    @contextlib.contextmanager
    def _unreadable(self) -> Iterator[None]:
        """One line naming the Minari dataset for whatever its reader fails with on a truncated
        or foreign file (Arrow, JSON, HDF5 and Minari's own errors have no common base)."""
        try:
            yield
        except ConfigError:
            raise
        except Exception as exc:  # a user's file: said in one line, never hidden
            gist = " ".join(f"{type(exc).__name__}: {exc}".split())[:160]
            raise ConfigError(f"{self.path}: the Minari dataset cannot be read ({gist})") from None

    def get(self, segment_ids: list[int]) -> dict[int, Segment]:
        """The segments ``segment_ids`` (each read once, in episode order)."""
        wanted = sorted({self.rows[i]["episode_id"]: i for i in segment_ids}.items())
        if not wanted:
            return {}
        for episode, seg_id in wanted:
            if not 0 <= episode < self.episodes:
                raise ConfigError(
                    f"segments.parquet: segment {seg_id} names episode {episode}; {self.path}"
                    f" has {self.episodes}"
                )
        with self._unreadable():
            episodes = list(self._minari.iterate_episodes([e for e, _ in wanted]))
        where = str(self.path)
        return {
            seg_id: check_segment(
                where, seg_id, lambda r=self.rows[seg_id], e=ep: self._segment(r, e)
            )
            for (_, seg_id), ep in zip(wanted, episodes, strict=True)
        }

    def all(self) -> dict[int, Segment]:
        return self.get(list(self.rows))

    @staticmethod
    def _segment(row: dict[str, Any], ep: Any) -> Segment:
        steps = len(ep.actions)
        if ep.id != row["episode_id"] or steps != row["length"]:
            raise ConfigError(
                f"Minari episode {ep.id} does not match segment {row['id']} in segments.parquet"
            )
        empty = np.zeros((steps, 0))
        return Segment(
            obs=ep.observations[:steps],
            actions=ep.actions,
            true_rewards=np.asarray(ep.rewards, np.float32),
            qpos=ep.infos["qpos"][:steps] if "qpos" in ep.infos else empty,
            qvel=ep.infos["qvel"][:steps] if "qvel" in ep.infos else empty,
            env_id=row["env_id"],
            start_step=row["start_step"],
            absorbing=row["absorbing"],
        )
