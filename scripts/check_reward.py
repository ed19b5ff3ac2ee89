"""Where a run's learned reward is wrong: scored against the run's true reward (the env's, or its
target behaviour's: --teacher.target/--teacher.reward), on the agent's own steps and off them (more action noise, zero actions, random actions), per reward term, and in the
steps before a fall. See rlhf/reward/check.py for what each figure means.

    .venv/bin/python scripts/check_reward.py runs/Walker2d-v5__synthetic__2__...
    .venv/bin/python scripts/check_reward.py RUN --episodes 10 --reward-model other/reward_model.pt

Needs a run with checkpoints/reward_model.pt and an agent (checkpoints/agent.pt or last.pt).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

from rlhf.commands.record import agent_state, policy, run_config
from rlhf.config import ConfigError
from rlhf.envs import make_env, with_target
from rlhf.envs.user_reward import resolve_target
from rlhf.reward.check import check_reward, format_check
from rlhf.reward.saved import load_saved_reward


def main(argv: list[str] | None = None) -> str:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run", metavar="RUN", help="a run directory")
    parser.add_argument("--episodes", type=int, default=5, help="episodes per behaviour")
    parser.add_argument("--seed", type=int, default=0, help="seed of the first reset")
    parser.add_argument(
        "--reward-model", metavar="FILE", help="default: RUN/checkpoints/reward_model.pt"
    )
    args = parser.parse_args(argv)
    if args.episodes < 1:
        parser.error("--episodes must be >= 1")
    torch.set_num_threads(1)
    run = Path(args.run)
    cfg = run_config(run)
    state, _ = agent_state(run)
    kwargs = cfg.env_kwargs_dict()
    target = resolve_target(cfg.teacher.target, cfg.teacher.reward, cfg.env_id, kwargs)
    env = with_target(make_env(cfg.env_id, kwargs), target)  # the true reward the run had
    try:
        obs_dim, act_dim = env.observation_space.shape[0], env.action_space.shape[0]
        act = policy(cfg, state, obs_dim, act_dim, env.action_space)
        path = Path(args.reward_model or run / "checkpoints" / "reward_model.pt")
        reward = load_saved_reward(path, cfg.env_id, obs_dim, act_dim)
        # The absorbing reward only means something to a run that pads episode ends with it.
        absorbing = reward.absorbing if cfg.termination_mode == "absorbing" else None
        check = check_reward(reward, absorbing, env, act, args.episodes, args.seed)
    finally:
        env.close()
    return format_check(check, cfg.env_id)


if __name__ == "__main__":
    try:
        print(main())
    except ConfigError as exc:
        print(f"check_reward.py: error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
