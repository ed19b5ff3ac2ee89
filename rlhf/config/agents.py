"""Settings of the two agents: PPO (``--ppo.*``) and SAC with PEBBLE's pretraining (``--sac.*``).

They live apart from :mod:`rlhf.config`, which only nests them. Validation takes the checker of
:mod:`rlhf.config` as an argument (importing it here would be a cycle), so every message still
names the flag exactly as ``--help`` spells it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Literal

import tyro

from rlhf.config.ranges import BIG, STEPS_MAX, WIDTH_MAX, Check, above, at_least, within


@dataclass(frozen=True)
class PPOConfig:
    """PPO hyperparameters (CleanRL ppo_continuous_action defaults)."""

    learning_rate: float = 3e-4
    """Adam learning rate."""
    anneal_lr: bool = True
    """Anneal the learning rate linearly to 0 over the run."""
    num_steps: int = 2048
    """Steps per env per rollout."""
    gamma: float = 0.99
    """Discount factor."""
    gae_lambda: float = 0.95
    """GAE lambda."""
    num_minibatches: int = 32
    """Minibatches per epoch."""
    update_epochs: int = 10
    """Epochs over each rollout."""
    norm_adv: bool = True
    """Normalise advantages per minibatch."""
    clip_coef: float = 0.2
    """Surrogate clipping coefficient."""
    clip_vloss: bool = True
    """Clip the value loss as in the PPO paper."""
    ent_coef: float = 0.0
    """Entropy bonus coefficient."""
    min_std: float = 0.0
    """Floor on the standard deviation of the policy's actions (0: none): after each gradient
    step the log-std is put back to at least log(min_std), so its gradient still moves it up
    from there. For a run whose learned reward drives the noise to nothing
    (TensorBoard: losses/action_std_min); not a default, as it did not hold on held-out seeds
    (measured: docs/results/few-labels-learner.md)."""
    restart_at: float = 0.0
    """With a learned reward: once this share of --total-timesteps is done, the policy and its
    value start again from new weights (the learning rate anneals anew over the steps left)
    and learn from the reward as it stands then, while the labels go on: for a run whose agent
    stays with what the first rounds' reward taught it. Not a default, as it did not hold on
    held-out seeds (measured: docs/results/few-labels-learner.md). 0: never."""
    vf_coef: float = 0.5
    """Value loss coefficient."""
    max_grad_norm: float = 0.5
    """Global gradient-norm clip."""
    target_kl: Annotated[float | None, tyro.conf.arg(metavar="FLOAT")] = None
    """Stop an update early when the approximate KL exceeds this (None: never)."""
    hidden_size: int = 64
    """Width of the two hidden layers of actor and critic."""
    init_log_std: Annotated[float | None, tyro.conf.arg(metavar="FLOAT")] = None
    """Initial log standard deviation of the Gaussian policy's actions; default: the env's
    preset (-1 on Ant: calmer behaviour lets PPO and RLHF learn there; rlhf/config/presets.py), else 0
    (std 1, CleanRL's)."""
    norm_obs: bool = True
    """Normalise the policy's observations with running statistics (the reward model sees raw ones)."""
    norm_reward: bool = True
    """Scale the reward PPO trains on by a running std of the discounted return, then clip to +-10."""
    end_value: Literal["zero", "absorbing"] = "zero"
    """With a learned absorbing reward (--terminations absorbing): zero: PPO trains on the learned
    reward minus the absorbing state's, so an episode's end is worth 0 and a step what it gains
    over having ended, as with an env's reward and its healthy bonus; absorbing: on the learned
    reward as it is, an end worth its absorbing reward forever (r_abs / (1 - gamma)). The two
    differ by a constant, which PPO's reward scaling and value network do not ignore (measured:
    docs/results/settings.md). Only once an episode has ended early: where none
    does (HalfCheetah), no label has taught the absorbing reward, and the rewards stay as they
    are."""
    end_margin: Annotated[float | None, tyro.conf.arg(metavar="FLOAT")] = None
    """With a learned absorbing reward: an episode's end counts this much below it per step, in
    units of the learned reward (its members are standardised over the labelled steps), so
    each step alive gains this much more over an end than the labels alone say: for an agent that
    ends its episodes early (falls) where it should stay up. Default: the env's preset (0.3 on Hopper;
    rlhf/config/presets.py), else 0 (measured: docs/results/settings.md)."""

    def validate(self, check: Check) -> None:
        above(check, "ppo.learning_rate", self.learning_rate, 0, 1.0)
        at_least(check, "ppo.num_steps", self.num_steps, 1, 10**7)
        within(check, "ppo.gamma", self.gamma, 0, 1, "[]")
        within(check, "ppo.gae_lambda", self.gae_lambda, 0, 1, "[]")
        at_least(check, "ppo.num_minibatches", self.num_minibatches, 1, 10**6)
        at_least(check, "ppo.update_epochs", self.update_epochs, 1, 10_000)
        above(check, "ppo.clip_coef", self.clip_coef, 0, 10.0)
        at_least(check, "ppo.ent_coef", self.ent_coef, 0, 10.0)
        # above 10 a policy's actions would be noise on any env's [-1, 1] box
        at_least(check, "ppo.min_std", self.min_std, 0, 10.0)
        within(check, "ppo.restart_at", self.restart_at, 0, 1, "[)")
        at_least(check, "ppo.vf_coef", self.vf_coef, 0, 100.0)
        above(check, "ppo.max_grad_norm", self.max_grad_norm, 0, 1e6)
        above(check, "ppo.target_kl", self.target_kl, 0, 100.0)
        at_least(check, "ppo.hidden_size", self.hidden_size, 1, WIDTH_MAX)
        # std exp(-10) to exp(5): beyond, float32 actions are all noise or never move
        at_least(check, "ppo.init_log_std", self.init_log_std, -10.0, 5.0)
        # nan or inf would reach every reward PPO sees and train on garbage without a word
        at_least(check, "ppo.end_margin", self.end_margin, -100.0, 100.0)


@dataclass(frozen=True)
class SACConfig:
    """SAC hyperparameters (CleanRL sac_continuous_action defaults) and PEBBLE pretraining."""

    buffer_size: int = 1_000_000
    """Transitions the replay buffer keeps (a checkpoint holds them all, so it grows with them)."""
    batch_size: int = 256
    """Transitions per gradient step."""
    gamma: float = 0.99
    """Discount factor."""
    tau: float = 0.005
    """Target networks move this far towards the critics after each gradient step."""
    learning_starts: int = 5000
    """Env steps of uniformly random actions before the first gradient step."""
    policy_lr: float = 3e-4
    """Adam learning rate of the actor."""
    q_lr: float = 1e-3
    """Adam learning rate of the twin critics (and of the entropy coefficient)."""
    policy_frequency: int = 2
    """Delayed policy updates: every this many gradient steps, as many actor updates."""
    update_every: int = 1
    """One gradient step every this many env steps (per env; CleanRL and B-Pref: 1). A gradient
    step is most of SAC's time on a CPU, so 2 buys minutes at the cost of what each env step
    teaches (--sac.pretrain-steps still counts gradient steps; measured:
    docs/results/few-labels-learner.md)."""
    alpha: float = 0.2
    """Entropy coefficient when --sac.no-autotune."""
    autotune: bool = True
    """Tune the entropy coefficient towards a target entropy of -act_dim."""
    init_alpha: float = 1.0
    """Where --sac.autotune starts the entropy coefficient (CleanRL: 1; B-Pref: 0.1, a calmer
    first policy that wanders less before the first labels)."""
    hidden_size: int = 256
    """Width of the two hidden layers of actor and critics."""
    hidden_dtype: Literal["auto", "float32", "bfloat16"] = "auto"
    """Precision of the hidden-to-hidden products of actor and critics (most of a step's
    arithmetic); bfloat16 halves a gradient step on CPUs that multiply it natively (AVX512-BF16,
    AMX-BF16, Arm BF16) and slows it down elsewhere; weights, Q-values and losses stay float32.
    auto: bfloat16 where the CPU (or GPU) multiplies it natively, else float32; the run says
    which when it starts and stores it, so a resumed run keeps it (measured:
    docs/results/off-policy.md, scripts/bench_sac.py)."""
    iteration_steps: int = 1000
    """Env steps (per env) between two preference rounds, log lines and checkpoint checks."""
    pretrain_steps: int = 9000
    """PEBBLE (--reward learned): gradient steps on a k-NN state-entropy reward after
    --sac.learning-starts and before the first query, then the critics are reset (B-Pref: 9000)."""
    entropy_k: int = 5
    """k of the k-nearest-neighbour state-entropy reward (B-Pref: 5)."""
    relabel: bool = True
    """Keep each transition's learned reward and rescore the whole buffer when the reward is
    refitted (PEBBLE's way): the same rewards as scoring each minibatch when it is sampled, the
    way of --sac.no-relabel, at a fraction of its cost per step (measured:
    docs/results/settings.md, scripts/bench_relabel.py). Not used with --sac.her, whose
    relabelled goals make every minibatch's rewards new."""
    her: bool = False
    """Hindsight experience replay for a goal-conditioned env: whole episodes are stored and
    each sampled transition's desired goal is, with probability k/(k+1) (k:
    --sac.her-future-k), replaced by a goal
    achieved later in its episode (the future strategy); the reward (the env's compute_reward,
    or the learned reward on the relabelled observation) is computed per minibatch."""
    her_future_k: float = 4.0
    """--sac.her: relabelled transitions per original one, at most (0: none)."""
    recent_share: float = 0.0
    """Share of each minibatch drawn from the last --sac.recent-steps env steps, the rest
    uniformly from the whole buffer (QPA's hybrid replay: the critics learn most where the
    policy acts now, which is where the newest labels taught the reward); 0: uniform (measured:
    docs/results/off-policy.md)."""
    recent_steps: int = 10_000
    """--sac.recent-share: how many of the newest transitions count as recent."""
    end_margin: float = 0.0
    """With a learned absorbing reward (--reward learned, --terminations absorbing): an
    episode's end counts this much below it per step, in units of the learned reward (its
    members are standardised over the labelled steps), so a termination bootstraps from
    (r_abs - margin) / (1 - gamma): for an agent that ends its episodes where it should stay up
    (what --end-margin is for PPO); 0: the end is worth what the labels say."""

    def validate(self, check: Check) -> None:
        # a checkpoint holds the whole buffer: 10^8 transitions are already tens of GB
        at_least(check, "sac.buffer_size", self.buffer_size, 1, 10**8)
        at_least(check, "sac.batch_size", self.batch_size, 1, 10**6)
        within(check, "sac.gamma", self.gamma, 0, 1, "[)")
        within(check, "sac.tau", self.tau, 0, 1, "(]")
        at_least(check, "sac.learning_starts", self.learning_starts, 0, STEPS_MAX)
        above(check, "sac.policy_lr", self.policy_lr, 0, 1.0)
        above(check, "sac.q_lr", self.q_lr, 0, 1.0)
        at_least(check, "sac.policy_frequency", self.policy_frequency, 1, 10**6)
        at_least(check, "sac.update_every", self.update_every, 1, 10**6)
        at_least(check, "sac.alpha", self.alpha, 0, 100.0)
        above(check, "sac.init_alpha", self.init_alpha, 0, 100.0)
        at_least(check, "sac.hidden_size", self.hidden_size, 1, WIDTH_MAX)
        at_least(check, "sac.iteration_steps", self.iteration_steps, 1, 10**7)
        at_least(check, "sac.pretrain_steps", self.pretrain_steps, 0, BIG)
        at_least(check, "sac.entropy_k", self.entropy_k, 1, 1000)
        at_least(check, "sac.her_future_k", self.her_future_k, 0, 100.0)
        within(check, "sac.recent_share", self.recent_share, 0, 1, "[]")
        at_least(check, "sac.recent_steps", self.recent_steps, 1, 10**8)
        # nan or inf would reach every bootstrap of a termination without a word
        at_least(check, "sac.end_margin", self.end_margin, -100.0, 100.0)
