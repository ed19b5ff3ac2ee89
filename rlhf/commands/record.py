"""``rlhf record RUN``: a video of a run's agent, from its saved weights.

The agent is ``checkpoints/agent.pt`` (written when a run finishes) or, before that,
``checkpoints/last.pt`` (the latest checkpoint). It acts with its mean action (no exploration
noise) in a fresh env built as the run built it (``config.json``: env id and kwargs, and its target
behaviour, whose return it reports beside the env's own), the physics state of every step is
recorded, and the frames are drawn from those states with the same renderer and camera as the
labelling clips, played at real time.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated

import numpy as np
import tyro

from rlhf.config import Config, ConfigError, VideoConfig, command_check
from rlhf.config.ranges import at_least, seed


@dataclass(frozen=True)
class Record:
    """rlhf record: render a run's trained (or latest checkpointed) agent to a video."""

    run: Annotated[str, tyro.conf.Positional, tyro.conf.arg(metavar="RUN")]
    """The run directory, e.g. runs/HalfCheetah-v5__human__1__20261122-101500."""
    episodes: int = 1
    """Episodes to record, one after another."""
    out: Annotated[str | None, tyro.conf.arg(metavar="FILE")] = None
    """Where to write the video (.mp4, .gif for an animated image, or .png for a film strip of 8
    frames spread over the recording); default RUN/agent.mp4."""
    max_steps: int = 1000
    """At most this many steps per episode."""
    seed: int = 0
    """Seed of the first episode's reset (the next ones use seed + 1, ...)."""
    video: VideoConfig = field(default_factory=VideoConfig)
    """Frame size and rendering settings (the labelling clips' defaults)."""

    def validate(self) -> None:
        check = command_check(Record)
        at_least(check, "episodes", self.episodes, 1, 10_000)
        at_least(check, "max_steps", self.max_steps, 1, 10**7)
        seed(check, "seed", self.seed)
        self.video.validate()


def agent_state(run: Path) -> tuple[dict, str]:
    """The agent's weights and which file they came from; one-line errors.

    Both files are read as checkpoints are: no pickled code, the checksum checked where the
    file has one, and a policy with NaN or infinite weights refused (it would act NaN).
    """
    from rlhf.run.checkpoint import CheckpointError, load_checkpoint, load_signed

    checkpoints = run / "checkpoints"
    way_out = "move it away to record the latest checkpoint (checkpoints/last.pt) instead"
    try:
        if (checkpoints / "agent.pt").is_file():
            return load_signed(checkpoints / "agent.pt", way_out=way_out), "agent.pt"
        if (checkpoints / "last.pt").is_file():
            return load_checkpoint(checkpoints / "last.pt")["agent"], "last.pt"
    except CheckpointError as exc:
        raise ConfigError(f"rlhf record {run}: {exc}") from None
    raise ConfigError(
        f"rlhf record {run}: no checkpoints/agent.pt or checkpoints/last.pt yet"
        " (the run has not saved an agent)"
    )


def run_config(run: Path) -> Config:
    from rlhf.run.run_dir import read_config

    if not run.is_dir():
        raise ConfigError(f"rlhf record {run}: no such run directory")
    if not (run / "config.json").is_file():
        raise ConfigError(f"rlhf record {run}: no config.json in it (is it a run directory?)")
    return read_config(run)


def policy(cfg: Config, state: dict, obs_dim: int, act_dim: int, space) -> Callable:
    """The agent's action for one raw observation: its deterministic action (PPO's mean, SAC's
    squashed mean), as agents are shown and evaluated."""
    import torch

    if cfg.algo == "sac":
        from rlhf.agent.sac_learner import SACLearner

        sac = SACLearner(obs_dim, act_dim, space.low, space.high, cfg.sac, torch.device("cpu"))
        sac.load_state_dict(state)
        actor = sac.actor_numpy()
        return lambda obs: actor.mean(obs[None].astype(np.float32))[0]
    from rlhf.agent.ppo_learner import PPOLearner

    ppo = PPOLearner(obs_dim, act_dim, 1, cfg.ppo, torch.device("cpu"))
    ppo.load_state_dict(state)
    actor, norm = ppo.actor(), ppo.obs_norm
    return lambda obs: actor.mean(norm(obs[None].astype(np.float32)))[0]


@dataclass(frozen=True)
class Recording:
    """What :func:`record` wrote."""

    path: Path
    returns: list[float]
    """The run's true return of each episode (with a target, the target's)."""
    env_returns: list[float]
    """With a target: the env's own return of each episode; else empty."""
    target: str | None = None
    """The run's target (``--teacher.target`` or ``--teacher.reward``); None: the env's reward."""


def record(command: Record) -> Recording:
    """Write the video; returns where, and the return of each episode."""
    from rlhf.envs import make_env, with_target
    from rlhf.envs.state import StateKind, state_kind
    from rlhf.envs.user_reward import resolve_target
    from rlhf.render.policy import write_gif, write_strip
    from rlhf.render.video import make_renderer, write_video

    command.validate()
    run = Path(command.run)
    cfg = run_config(run)
    state, _ = agent_state(run)
    kwargs = cfg.env_kwargs_dict()
    target = resolve_target(cfg.teacher.target, cfg.teacher.reward, cfg.env_id, kwargs)
    # flat observations, as the agent was trained on; the reward the run reported
    env = with_target(make_env(cfg.env_id, kwargs), target)
    renderer = make_renderer(cfg.env_id, command.video, kwargs or None)
    try:
        obs_dim, act_dim = env.observation_space.shape[0], env.action_space.shape[0]
        act = policy(cfg, state, obs_dim, act_dim, env.action_space)
        frames, returns, env_returns = [], [], []
        for episode in range(command.episodes):
            qpos, qvel, obs, ret, env_ret = _episode(
                env, act, command.seed + episode, command.max_steps
            )
            size = renderer.goal_size  # goal envs: each frame draws the goal it was after
            frames.append(renderer.render(qpos, qvel, obs[:, -size:] if size else None))
            returns.append(ret)
            env_returns.append(env_ret)
        video = np.concatenate(frames)
        video = video[:, : video.shape[1] // 2 * 2, : video.shape[2] // 2 * 2]
        out = Path(command.out) if command.out else run / "agent.mp4"
        out.parent.mkdir(parents=True, exist_ok=True)
        if out.suffix.lower() == ".gif":
            write_gif(video, out, renderer.fps)
        elif out.suffix.lower() == ".png":
            write_strip(video, out)
        else:
            write_video(video, out, renderer.fps)
        assert state_kind(env) in (StateKind.MUJOCO, StateKind.CLASSIC)
    finally:
        renderer.close()
        env.close()
    name = None if target is None else target.name
    return Recording(out, returns, env_returns if target is not None else [], name)


def _episode(
    env, act, seed: int, max_steps: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, float, float]:
    """One episode's recorded states (qpos, qvel per step), observations, true return and the
    env's own return (the same without a target)."""
    from rlhf.envs import ENV_REWARD
    from rlhf.envs.state import StateKind, mujoco_data, mujoco_sim, state_kind

    obs, _ = env.reset(seed=seed)
    inner, mujoco = mujoco_sim(env), state_kind(env) is StateKind.MUJOCO
    data = mujoco_data(env) if mujoco else None  # gymnasium's data, or dm_control's physics.data
    qpos, qvel, seen, ret, env_ret = [], [], [], 0.0, 0.0
    low, high = env.action_space.low, env.action_space.high
    for _ in range(max_steps):
        if mujoco:
            qpos.append(np.array(data.qpos))
            qvel.append(np.array(data.qvel))
        else:
            qpos.append(np.asarray(inner.state, np.float64).copy())
            qvel.append(np.zeros(0))
        seen.append(obs)
        obs, reward, terminated, truncated, info = env.step(np.clip(act(obs), low, high))
        ret += float(reward)
        env_ret += float(info.get(ENV_REWARD, reward))
        if terminated or truncated:
            break
    return np.asarray(qpos), np.asarray(qvel), np.asarray(seen), ret, env_ret


def record_main(command: Record) -> None:
    done = record(command)

    def shown(values: list[float]) -> str:
        return ", ".join(f"{r:.1f}" for r in values)

    returns = f"true return {shown(done.returns)}"
    if done.target is not None:
        returns = (
            f"target {done.target} return {shown(done.returns)};"
            f" env return {shown(done.env_returns)}"
        )
    print(f"Wrote {done.path} ({len(done.returns)} episode(s), {returns})")
