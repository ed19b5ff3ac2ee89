"""The agent in view: the idle render worker draws the newest policy clip (MP4 + GIF), the
trainer logs it to TensorBoard under videos/policy, and the curve stays bounded."""

from __future__ import annotations

import numpy as np

from rlhf.render.worker import RenderWorker
from rlhf.run import agent_view
from rlhf.run.logger import Logger
from rlhf.store import LabelStore
from rlhf.store.policy import MAX_CURVE_POINTS, VIDEO_DROPPED
from tests.render.test_worker import CFG, STEPS, _decoded_frames, _good_pairs, _wait_for


def _tb_tags(log_dir) -> dict[str, list[int]]:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(log_dir), size_guidance={"images": 0})
    acc.Reload()
    return {tag: [e.step for e in acc.Images(tag)] for tag in acc.Tags()["images"]}


def test_worker_draws_the_newest_clip_and_the_trainer_logs_it(tmp_path) -> None:
    store = LabelStore(tmp_path / "labels.sqlite")
    pairs = _good_pairs(2)
    old = store.add_policy_clip(pairs[0].left, iteration=1, env_step=2048)
    new = store.add_policy_clip(pairs[1].left, iteration=11, env_step=22528)
    with RenderWorker(tmp_path / "labels.sqlite", tmp_path / "videos", CFG, poll_interval=0.05):
        _wait_for(lambda: store.latest_policy_clip() is not None)
    clip = store.latest_policy_clip()
    assert clip is not None and clip.id == new  # only what the policy does now is drawn
    assert store.policy_clip(old).video_status == VIDEO_DROPPED
    assert _decoded_frames(clip.video_path) == STEPS
    assert clip.video_path.endswith(f"videos/policy/{new}.mp4")

    logger = Logger(tmp_path / "tb", 1000, progress=False)
    assert agent_view.log_clips(logger, store, after=0) == new
    assert agent_view.log_clips(logger, store, after=new) == new  # each clip once
    logger.close()
    assert _tb_tags(tmp_path / "tb") == {"videos/policy": [22528]}
    store.close()


def test_the_curve_keeps_recent_points_dense_and_its_size_bounded(tmp_path) -> None:
    store = LabelStore(tmp_path / "labels.sqlite")
    for i in range(1, 1001):
        agent_view.record_point(store, i, 2048 * i, [float(i)], np.array([0.5, 1.5]), None)
    points = store.curve()
    assert MAX_CURVE_POINTS // 2 <= len(points) <= MAX_CURVE_POINTS
    assert points[-1].iteration == 1000 and points[-1].predicted_return == 1.0
    assert [p.iteration for p in points[-50:]] == list(range(951, 1001))
    agent_view.record_point(store, 1001, 0, [], None, float("nan"))
    last = store.curve()[-1]
    assert (last.true_return, last.predicted_return, last.accuracy) == (None, None, None)
    store.close()


def test_clips_are_due_first_early_then_every_few_iterations() -> None:
    assert [i for i in range(1, 25) if agent_view.clip_due(i, 10)] == [1, 11, 21]
    assert not any(agent_view.clip_due(i, 0) for i in range(1, 25))


def test_a_synthetic_run_with_policy_clip_every_puts_clips_in_tensorboard(tmp_path) -> None:
    """Opt-in for synthetic feedback: one render process draws the clips the trainer queues; the
    clips drawn by the end of the run (the last within the finish grace) reach TensorBoard."""
    from rlhf.config import Config, PPOConfig, QueryConfig
    from rlhf.run.runner import run

    cfg = Config(
        env_id="InvertedPendulum-v5", total_timesteps=256, seed=1,
        feedback="synthetic", runs_dir=str(tmp_path), run_name="clips", progress=False,
        policy_clip_every=1, video=CFG,
        ppo=PPOConfig(num_steps=128, num_minibatches=2, update_epochs=1),
        query=QueryConfig(total_labels=4, segment_length=8),
    )  # fmt: skip
    run(cfg)
    steps = _tb_tags(tmp_path / "clips" / "tb").get(agent_view.TB_TAG, [])
    assert steps and set(steps) <= {128, 256}  # at the env step each clip shows
    store = LabelStore(tmp_path / "clips" / "labels.sqlite")
    assert store.policy_clips_in_flight() == 0 and store.policy_clip_error() is None
    store.close()


class _Said:
    """A logger that keeps its lines (show logs no GIF here: no clip is ever drawn)."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def message(self, text: str) -> None:
        self.lines.append(text)


def test_a_synthetic_run_queues_clips_only_when_asked_and_warns_once_when_none_can_be_drawn(
    tmp_path,
) -> None:
    from rlhf.config import Config
    from rlhf.store import VIDEO_FAILED

    store = LabelStore(tmp_path / "labels.sqlite")
    segments = [p.left for p in _good_pairs(1)]
    said = _Said()
    point = ([1.0], None, None)
    default = Config(feedback="synthetic")
    agent_view.show(default, store, said, 1, 128, segments, point, 0)  # type: ignore[arg-type]
    assert store.policy_clips_in_flight() == 0  # off by default: nothing to draw them
    asked = Config(feedback="synthetic", policy_clip_every=1)
    agent_view.show(asked, store, said, 2, 256, segments, point, 0)  # type: ignore[arg-type]
    assert store.policy_clips_in_flight() == 1 and said.lines == []
    store.mark_policy_clip(1, VIDEO_FAILED, error="no working GL backend")  # as a worker would
    for iteration in (3, 4):
        agent_view.show(asked, store, said, iteration, 128 * iteration, segments, point, 0)  # type: ignore[arg-type]
    assert len(said.lines) == 1 and "no working GL backend" in said.lines[0]
    assert "training goes on" in said.lines[0]
    store.close()


def test_a_synthetic_run_whose_render_process_dies_trains_on_and_says_so_once(
    tmp_path, monkeypatch, capsys
) -> None:
    """The render process inherits a GL backend MuJoCo refuses at import, so it dies at once
    (a human run would stop: no pair could be shown): the run still finishes, and one line says
    so. Clips a working process cannot draw are the other case (the test above)."""
    from rlhf.config import Config, PPOConfig, QueryConfig
    from rlhf.run.runner import run

    monkeypatch.setenv("MUJOCO_GL", "no-such-backend")  # read by the spawned render process
    cfg = Config(
        env_id="InvertedPendulum-v5", total_timesteps=256, seed=1, feedback="synthetic",
        runs_dir=str(tmp_path), run_name="nogl", progress=False, policy_clip_every=1, video=CFG,
        ppo=PPOConfig(num_steps=128, num_minibatches=2, update_epochs=1),
        query=QueryConfig(total_labels=4, segment_length=8),
    )  # fmt: skip
    summary = run(cfg)
    assert (summary.status, summary.env_steps) == ("finished", 256)
    out = capsys.readouterr()
    said = [line for line in (out.out + out.err).splitlines() if "training goes on" in line]
    assert len(said) == 1 and "render process for policy clips stopped" in said[0], out
    assert agent_view.TB_TAG not in _tb_tags(tmp_path / "nogl" / "tb")
