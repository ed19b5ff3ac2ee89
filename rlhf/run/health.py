"""Stop a run whose numbers stopped being numbers, with one line that says which and where.

A NaN spreads silently: a policy with a NaN weight acts NaN, the env answers NaN observations and
rewards, and the run used to end far from the cause (the label store refusing a segment whose
return was NaN). These checks run once an iteration, on what the rollout brought and on what
the update left, so the line names the first thing that broke; a checkpoint is never written
over a good one with a broken policy in it.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from rlhf.agent.collector import PolicyRollout
from rlhf.config import Config, flag
from rlhf.core.shell import short_path
from rlhf.core.signed import nonfinite
from rlhf.run.lifecycle import RunError
from rlhf.run.run_dir import RunDir


def check_rollout(cfg: Config, run_dir: RunDir, rollout: PolicyRollout, step: int) -> None:
    """Refuse a rollout with a non-finite action (the policy broke), observation or reward (the
    env did: with ``--env-kwargs`` the likely cause)."""
    raw = rollout.raw
    valid = raw.valid
    for what, values in (
        ("action", raw.actions),
        ("observation", raw.obs),
        ("reward", raw.true_rewards),
    ):
        if np.isfinite(values[valid]).all():
            continue
        if what == "action":
            raise policy_broke(cfg, run_dir, step, "actions")
        kwargs = cfg.env_kwargs_dict()
        hint = (
            f" (the env was made with {flag('env_kwargs')} {cfg.env_kwargs}: check its values)"
            if kwargs
            else ""
        )
        raise RunError(
            f"{cfg.env_id} returned a non-finite {what} (NaN or infinity) by step {step:,}{hint};"
            " nothing after it was learned from, and every label stored before it is kept"
        )


def check_agent(cfg: Config, run_dir: RunDir, agent_state: dict[str, Any], step: int) -> None:
    """Refuse an agent whose parameters (or optimiser state) hold a NaN or an infinity."""
    bad = nonfinite(agent_state)
    if bad:
        raise policy_broke(cfg, run_dir, step, f"parameters (in {bad[0].lstrip('.')})")


def policy_broke(cfg: Config, run_dir: RunDir, step: int, what: str) -> RunError:
    """The one line for a policy that diverged: the way out keeps its labels."""
    rate = flag("ppo.learning_rate" if cfg.algo == "ppo" else "sac.policy_lr")
    return RunError(
        f"the policy's {what} became non-finite (NaN or infinity) at step {step:,}; its last"
        " checkpoint and every label are kept, but it would diverge again: start a new run on"
        f" its labels with --labels-from {short_path(run_dir.root)} --run-name NEW and a lower"
        f" {rate}"
    )
