"""``rlhf train --reward-model FILE``: a policy trained on a reward fitted earlier, asking no labels.

The file is what ``rlhf reward fit`` writes or a run's ``checkpoints/reward_model.pt``: the state
of a :class:`~rlhf.reward.learner.RewardLearner`, with the env id it was fitted for (a run's own
file written before that key existed names it in the run's ``config.json`` next door).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from rlhf.config import ConfigError, flag
from rlhf.core.signed import SignedFileError, load_signed
from rlhf.reward.learner import RewardLearner


@dataclass(frozen=True)
class SavedReward:
    """A fitted reward as the agent sees it: ``(obs, actions) -> rewards`` and the value of a
    step in the absorbing state (after an episode's end)."""

    learner: RewardLearner
    absorbing: float

    def __call__(self, obs: np.ndarray, actions: np.ndarray) -> np.ndarray:
        return self.learner.score(obs, actions)


def load_saved_reward(
    path: Path, env_id: str, obs_dim: int, act_dim: int, device: torch.device | str = "cpu"
) -> SavedReward:
    """The reward in ``path``, checked against the run's env; one line naming the flag if not."""
    name = flag("reward_model_file")
    if not path.is_file():
        raise ConfigError(f"{name} {path}: no such file")
    try:  # the digest (files written since it exists) and finite weights are checked on load
        state = load_signed(path, device)
    except SignedFileError as exc:
        raise ConfigError(f"{name} {exc}") from None
    try:
        learner = RewardLearner.from_state_dict(state, device)
    except (OSError, RuntimeError, KeyError, TypeError, ValueError, AttributeError) as exc:
        reason = " ".join(str(exc).split())[:120]
        raise ConfigError(f"{name} {path} is not a saved reward model ({reason})") from None
    fitted_for = state.get("env_id") or _run_env(path)
    if fitted_for is not None and fitted_for != env_id:
        raise ConfigError(
            f"{name} {path} was fitted on {fitted_for}, not {flag('env_id')} {env_id}"
        )
    ens = learner.ensemble
    if (ens.obs_dim, ens.act_dim) != (obs_dim, act_dim):
        raise ConfigError(
            f"{name} {path} takes {ens.obs_dim} observations and {ens.act_dim} actions;"
            f" {env_id} has {obs_dim} and {act_dim}"
        )
    if not learner.trained:
        raise ConfigError(f"{name} {path} was never fitted to a label")
    return SavedReward(learner, learner.absorbing_reward())


def _run_env(path: Path) -> str | None:
    """The env id of the run whose ``checkpoints/`` holds ``path``, if it is a run's file."""
    config = path.resolve().parent.parent / "config.json"
    if path.resolve().parent.name != "checkpoints" or not config.is_file():
        return None
    try:
        return json.loads(config.read_text()).get("env_id")
    except ValueError:
        return None
