"""The README's before/after picture: an untrained and a trained agent side by side, as an
animated GIF, drawn the way ``rlhf record`` draws a run's agent.

    PYTHONPATH=. python scripts/readme_before_after.py RUN [--out docs/images/before_after.gif]

RUN is a finished run (its ``checkpoints/agent.pt``); "before" is the same network freshly
initialised (seed 0), so both sides start from the same reset.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import numpy as np

os.environ.setdefault("MUJOCO_GL", "egl")


def main() -> None:
    import gymnasium as gym
    import torch

    from rlhf.agent.ppo_learner import PPOLearner
    from rlhf.commands.record import _episode, agent_state, policy, run_config
    from rlhf.config import VideoConfig
    from rlhf.render.policy import write_gif
    from rlhf.render.video import compose_pair, make_renderer

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", type=Path)
    parser.add_argument("--out", type=Path, default=Path("docs/images/before_after.gif"))
    parser.add_argument("--steps", type=int, default=120)
    parser.add_argument("--size", type=int, default=160)
    args = parser.parse_args()

    cfg = run_config(args.run)
    trained, _ = agent_state(args.run)
    torch.manual_seed(0)
    untrained = PPOLearner(17, 6, 1, cfg.ppo, torch.device("cpu")).state_dict()
    env = gym.make(cfg.env_id, **cfg.env_kwargs_dict())
    renderer = make_renderer(cfg.env_id, VideoConfig(width=args.size, height=args.size))
    clips, returns = [], []
    for state in (untrained, trained):
        dims = env.observation_space.shape[0], env.action_space.shape[0]
        act = policy(cfg, state, *dims, env.action_space)
        qpos, qvel, ret = _episode(env, act, seed=0, max_steps=args.steps)
        clips.append(renderer.render(qpos, qvel))
        returns.append(ret)
    renderer.close()
    env.close()
    steps = min(len(c) for c in clips)
    frames = compose_pair(
        clips[0][:steps], clips[1][:steps], ("INIT", "TRAINED")
    )  # the caption font: few letters
    # Every other frame: half the file, still smooth at 10 frames per second.
    write_gif(np.ascontiguousarray(frames[::2]), args.out, renderer.fps / 2)
    size = args.out.stat().st_size // 1024
    print(
        f"wrote {args.out} ({size} KiB) return_before={returns[0]:.1f} return_after={returns[1]:.1f}"
    )


if __name__ == "__main__":
    main()
