"""The learning and labelling sections of a run's settings: the learned reward
(``--reward-model.*``), the queries (``--query.*``), the synthetic teacher (``--teacher.*``), the
clips (``--video.*``) and the labelling page (``--web.*``).

:mod:`rlhf.config` nests them in :class:`~rlhf.config.Config` and re-exports them. Their
``validate`` takes the checker :class:`~rlhf.config.Config` validates with, or by default
:func:`~rlhf.config.errors.check_setting` (a command that validates one section alone).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Literal

import tyro

from rlhf.config.errors import ConfigError, check_setting
from rlhf.config.ranges import BIG, STEPS_MAX, WIDTH_MAX, Check, above, at_least, within
from rlhf.core.labellers import LabellerError, labeller_names


@dataclass(frozen=True)
class RewardConfig:
    """The learned reward: an ensemble of MLPs trained with the Bradley-Terry loss."""

    ensemble_size: int = 3
    """Number of reward models in the ensemble."""
    hidden_sizes: tuple[int, ...] = (64, 64)
    """Hidden layer widths of each member (Christiano et al. used two layers of 64 for MuJoCo)."""
    learning_rate: float = 1e-3
    """Adam learning rate of the reward models."""
    weight_decay: float = 1.0
    """AdamW's decoupled weight decay: each step shrinks the weights by learning_rate x this. A
    few hundred answers cannot tell a feature that only came with progress in the labelled clips
    from progress itself; the decay keeps the reward from leaning on such a feature (0: none)."""
    input_sparsity: float = 0.0
    """Group lasso on each member's inputs: every gradient step adds this times the sum over the
    input quantities (observation entries, action entries, the absorbing flag) of the norm of
    the first layer's weights on that quantity, so a member leans on few of them. A task's
    reward usually depends on a few quantities (a speed, a height, the effort of the actions);
    with a few hundred answers and many inputs (Ant: 113), a member otherwise spreads its weight
    over inputs that only happened to vary with the answers (0: off; measured, not the default:
    docs/results/few-labels-reward.md)."""
    dropout: float = 0.0
    """Dropout probability in training (prediction always runs in eval mode)."""
    batch_size: int = 64
    """Pairs per gradient step."""
    max_epochs: Annotated[int | None, tyro.conf.arg(metavar="INT")] = None
    """Upper bound on epochs over all labels per training round. Default: 100 with --algo sac
    (PEBBLE's rounds fit every label to convergence), else 30 (rlhf/config/presets.py)."""
    min_epoch_steps: Annotated[int | None, tyro.conf.arg(metavar="INT")] = None
    """Gradient steps an epoch makes at least: with few labels it passes over them several
    times, so early stopping does not end a first round near chance (140 training labels are 3
    steps a pass). Default: 32 with --algo sac, else the env's preset (32 on HalfCheetah and
    Walker2d; rlhf/config/presets.py), else 1 (one pass per epoch)."""
    output_init: Annotated[
        Literal["random", "zero"] | None, tyro.conf.arg(metavar="{random,zero}")
    ] = None
    """How each member's output layer starts. zero: an untrained member predicts 0 (every pair a
    tie), so a round that stops early leaves a flat reward instead of a random one, and those
    ties do not compete in early stopping. Default: the env's preset (zero on HalfCheetah and
    Walker2d), else random (PyTorch's default)."""
    output_bound: Literal["none", "tanh"] = "none"
    """What bounds each member's per-step reward: none (a linear output, unbounded), or tanh, so
    every step's reward lies in (-1, 1) before the members are standardised (PEBBLE's reward
    model). A linear output grows without bound along any direction the labels leave open, and
    the agent can follow it there; tanh caps what such a direction pays."""
    label_noise: float = 0.1
    """Share of answers the reward model assumes were given at random (a person gets about one
    in ten wrong): P(left) = (1 - e) sigmoid(R_left - R_right) + e/2 (Christiano et al. 2017), so
    a wrong answer cannot outweigh the answers that agree with each other. 0: the plain
    Bradley-Terry loss (measured: docs/results/settings.md)."""
    patience: int = 3
    """Stop a round after this many epochs without a better validation loss."""
    val_fraction: Annotated[float | None, tyro.conf.arg(metavar="FLOAT")] = None
    """Share of labels held out for validation (and early stopping); 0: every label trains, each
    round runs --reward-model.max-epochs. Default: 0 with --algo sac (SAC optimises a reward
    that stopped early before it fits), else 0.2 (rlhf/config/presets.py)."""
    retrain_growth: float = 0.1
    """Retrain the ensemble once the labels have grown by this fraction since the last round (the
    first labels always train). Bounds reward-training time over a run: a larger value
    spends less time on reward training, and the reward follows new labels later (measured:
    docs/results/settings.md)."""
    observations_only: bool = False
    """The reward sees observations only (actions are zeroed before the network sees them). The
    labels of a run tie action size to progress (the segments that move more also spend more),
    so a reward that sees actions can learn to pay for large actions, the opposite of a control
    cost; one without them cannot learn a control cost either way. Try it where a learned reward
    pays for large actions (the agent flails); leave it off where the env's control cost matters (measured:
    docs/results/settings.md)."""
    effort_cost: bool = False
    """The network reads no action (as with --reward-model.observations-only); the actions enter
    only as a learned cost, sum_j c_j a_j^2 with c_j >= 0 per action entry, so the reward can
    learn what effort costs and never pay for it. For a run whose reward pays for effort (the
    busier clips of a run also move more, and the agent learns to flail); it loses what a torque
    tells of the motion about to be seen (measured, not the default:
    docs/results/few-labels-reward.md, docs/results/few-labels-learner.md)."""
    sees: Literal["observation", "motion"] = "motion"
    """What of an observation the reward reads. motion: the robot's joint positions and
    velocities only, what a clip shows a person, where the observation starts with them
    (gymnasium's MuJoCo robots: Ant-v5's 78 contact forces and Humanoid's inertias and forces
    are left out, and on HalfCheetah, Hopper, Walker2d and Swimmer they are the whole
    observation); elsewhere the whole observation. observation: all of it. The policy sees the
    whole observation either way. A reward that reads contact forces from a few hundred labels
    pays for what they happen to correlate with, not for the motion a person judged
    (measured: docs/results/few-labels-reward.md)."""
    explore_bonus: float = 0.0
    """RUNE (Liang et al. 2022): the agent is paid this many times the members' disagreement (the
    std of their standardised rewards) on top of their mean, so it tries what the labels leave
    open and the next queries can settle it. Try it where a first reward sends seeds the wrong
    way for good (it kept HalfCheetah's seeds from running backwards, but did not lift the five
    tasks as a whole). Negative: caution instead, the agent is paid less where the members
    disagree. 0: off (measured: docs/results/few-labels-learner.md)."""
    explore_half_life: int = 100_000
    """Env steps after which the bonus of --reward-model.explore-bonus has halved."""
    restart_below: float = 0.0
    """Before each round after the first, the share of the new labels (those since the last
    round: the teacher on what the agent does now) that the reward already orders right is
    logged as reward/fresh_accuracy. Below this share, on at least 10 new labels, the members
    start the round from new weights instead of the last round's: a reward that misorders the
    agent's own behaviour is fitted again from scratch rather than patched. 0: never (measured,
    and not kept: docs/results/few-labels-queries.md)."""

    self_predict: float = 0.0
    """REED-like (Metcalf et al. 2023): each gradient step of a round also trains the members'
    hidden layers to predict the next observation from the steps in the query pool (the agent's
    recent behaviour, labelled or not), with this weight on that loss; so the features the
    reward is built from follow the dynamics rather than whatever fits a few hundred answers.
    Runs only (rlhf reward fits labels alone). 0: off (measured:
    docs/results/few-labels-behaviours.md)."""

    def validate(self, check: Check = check_setting) -> None:
        at_least(check, "reward_model.ensemble_size", self.ensemble_size, 1, 100)
        check(len(self.hidden_sizes) <= 16, "{reward_model.hidden_sizes} takes at most 16 layers")
        for width in self.hidden_sizes:  # a zero-width layer would train a net that is constant
            at_least(check, "reward_model.hidden_sizes", width, 1, WIDTH_MAX)
        above(check, "reward_model.learning_rate", self.learning_rate, 0, 1.0)
        at_least(check, "reward_model.weight_decay", self.weight_decay, 0, 100.0)
        at_least(check, "reward_model.input_sparsity", self.input_sparsity, 0, 100.0)
        within(check, "reward_model.dropout", self.dropout, 0, 1, "[)")
        within(check, "reward_model.val_fraction", self.val_fraction, 0, 1, "[)")
        at_least(check, "reward_model.batch_size", self.batch_size, 1, 10**6)
        at_least(check, "reward_model.max_epochs", self.max_epochs, 1, 10**6)
        within(check, "reward_model.label_noise", self.label_noise, 0, 1, "[)")
        at_least(check, "reward_model.min_epoch_steps", self.min_epoch_steps, 1, 10**6)
        at_least(check, "reward_model.patience", self.patience, 1, 10**6)  # 0: no epoch at all
        at_least(check, "reward_model.retrain_growth", self.retrain_growth, 0, 100.0)
        within(check, "reward_model.explore_bonus", self.explore_bonus, -100.0, 100.0, "[]")
        at_least(check, "reward_model.explore_half_life", self.explore_half_life, 1, STEPS_MAX)
        within(check, "reward_model.restart_below", self.restart_below, 0, 1, "[]")
        at_least(check, "reward_model.self_predict", self.self_predict, 0, 100.0)


@dataclass(frozen=True)
class QueryConfig:
    """Which segment pairs are sent for labelling, and when."""

    total_labels: int = 200
    """Labels requested over the whole run (200: what a person gives in a sitting, about 10
    minutes of answers)."""
    initial_fraction: float = 0.25
    """Share of labels requested up front from the initial random policy (Christiano: ~25%)."""
    segment_seconds: float = 2.0
    """Simulated seconds per segment when a person labels (Christiano et al. showed 1-2 s
    clips; e.g. Hopper 250 steps, HalfCheetah 40), at most one episode."""
    segment_length: Annotated[int | None, tyro.conf.arg(metavar="STEPS")] = None
    """Steps per segment; default: --query.segment-seconds for human feedback, 50 steps for the
    synthetic teacher (as B-Pref; measured: docs/results/settings.md)."""
    pool_size: Annotated[int | None, tyro.conf.arg(metavar="INT")] = None
    """Recent segments kept as candidates; default 2000, and 125 under --algo sac (queries from
    the policy's recent behaviour, as QPA; measured: docs/results/off-policy.md)."""
    selection: Annotated[
        Literal["uniform", "disagreement", "entropy"] | None,
        tyro.conf.arg(metavar="{uniform,disagreement,entropy}"),
    ] = None
    """How candidate pairs are ranked: at random, by ensemble std of P(left>right), or by
    entropy; default disagreement, and uniform under --algo sac (as QPA)."""
    oversample: int = 10
    """Candidates drawn per requested pair before ranking."""
    retire_after: int = 20
    """Human feedback: a pair still unanswered this many PPO iterations after it was asked for
    is no longer shown (it judges a policy that no longer exists) and a fresh one is asked for
    in its place; 0: never."""
    half_rate_steps: Annotated[int | None, tyro.conf.arg(metavar="STEPS")] = None
    """Env steps after which the rate of new queries has halved (it decays like 1/T); default:
    a quarter of --total-timesteps, at most 75,000 (labels early, while the policy changes most)."""
    replay_share: Annotated[float | None, tyro.conf.arg(metavar="FLOAT")] = None
    """Share of the pairs asked at once (after the first reward round; round(share x pairs
    asked), so late single queries are never replayed) that are *replayed pairs*: from a pool
    segment's first recorded physics state, the current policy is rolled out twice with its
    action noise scaled by 0.3 and by 1.5, so the two differ in what acting costs more than in
    progress (rlhf/queries/replayed.py). PPO on MuJoCo envs only; their env steps are counted in
    labels/replay_steps, not in --total-timesteps. Use it where the labels tie action size to
    progress (the segments that move more also spend more), so the reward learns what acting
    costs. Default: the env's preset (0.3 on Ant; rlhf/config/presets.py), else 0 (measured:
    docs/results/settings.md)."""
    ask_when_new: Annotated[float | None, tyro.conf.arg(metavar="FLOAT")] = None
    """Ask for labels ahead of the schedule (by up to --query.ask-ahead of the budget, borrowed
    from later rounds) while more than this share of a rollout's steps have some reward input
    outside the central 99% of the labelled steps' (rlhf/queries/novelty.py): the reward only
    guesses about behaviour its labels never showed. Default: off, ask by the schedule alone
    (measured: docs/results/few-labels-behaviours.md)."""
    ask_ahead: float = 0.1
    """Share of --query.total-labels that --query.ask-when-new may ask ahead of the schedule."""
    ask_until: float = 1.0
    """Share of --total-timesteps by which every label has been asked: the schedule's curve
    compressed into that part of the run, after which the reward no longer changes (1: spread
    over the whole run). With --restart-at at the same share, the new policy learns from a
    fixed reward, as PPO from new weights on a saved one. Not a default: the late answers, from
    a policy that has learned, were worth more (measured: docs/results/few-labels-learner.md)."""

    def validate(self, check: Check = check_setting) -> None:
        at_least(check, "query.total_labels", self.total_labels, 0, 10**7)
        within(check, "query.initial_fraction", self.initial_fraction, 0, 1, "[]")
        # A clip a person watches: ten minutes is already far longer than anyone can judge.
        above(check, "query.segment_seconds", self.segment_seconds, 0, 600.0)
        at_least(check, "query.segment_length", self.segment_length, 1, 10**6)
        at_least(check, "query.oversample", self.oversample, 1, 10_000)
        at_least(check, "query.pool_size", self.pool_size, 2, 10**7)
        at_least(check, "query.retire_after", self.retire_after, 0, BIG)
        at_least(check, "query.half_rate_steps", self.half_rate_steps, 1, STEPS_MAX)
        within(check, "query.replay_share", self.replay_share, 0, 1, "[]")
        within(check, "query.ask_when_new", self.ask_when_new, 0, 1, "[]")
        within(check, "query.ask_ahead", self.ask_ahead, 0, 1, "[]")
        within(check, "query.ask_until", self.ask_until, 0, 1, "(]")


@dataclass(frozen=True)
class TeacherConfig:
    """Synthetic teacher (B-Pref, Lee et al. 2021). Defaults: the perfect oracle."""

    beta: float = float("inf")
    """Rationality: P(left) = sigmoid(beta * (R_left - R_right)), R in env-reward units; inf = always
    the better one (an exact tie is 'equal')."""
    gamma: float = 1.0
    """Myopia: step t of a segment of length H is weighted gamma**(H-1-t); every other rule uses
    these weighted returns."""
    mistake: float = 0.0
    """Probability of flipping a left/right answer (never an 'equal' or a skip)."""
    skip_threshold: float = 0.0
    """Skip a pair when both returns are below lo + this * (hi - lo), where lo/hi are the lowest and
    highest segment returns the teacher has seen (0: never skip)."""
    equal_threshold: float = 0.0
    """Answer 'equal' when |R_left - R_right| < this * (hi - lo), the range of segment returns seen
    (0: never, but for exact ties when beta is inf)."""
    target: Annotated[str | None, tyro.conf.arg(metavar="NAME")] = None
    """A target behaviour that replaces the env's reward as the run's true reward: what the
    synthetic teacher labels by, what --reward env trains on, and the return the run reports as
    charts/target_return (the env's own: charts/env_return). With --feedback human it only
    measures. Names (the robots each is defined for): speed, backward (HalfCheetah, Hopper,
    Walker2d, Ant, Swimmer), stand, hop (Hopper, Walker2d), jump (HalfCheetah, Hopper, Walker2d),
    backflip (HalfCheetah, Hopper), crawl (HalfCheetah, Walker2d, Ant); formulas:
    docs/guide/synthetic.md and rlhf/envs/targets.py."""
    reward: Annotated[str | None, tyro.conf.arg(metavar="MODULE:FUNCTION")] = None
    """Your own target instead of a named one: a function in an importable module, as in
    mypkg.rewards:speed, or in a file, as in path/to/rewards.py:speed. It is called with the
    keyword arguments obs, action, next_obs, qpos, qvel (arrays with a leading batch axis; the
    physics state after the step) and returns one finite reward per row. Checked on two steps of
    the env before the run starts."""

    @property
    def target_name(self) -> str | None:
        """The run's target as given (a name or MODULE:FUNCTION); None: the env's own reward."""
        return self.target if self.target is not None else self.reward

    def validate(self, check: Check = check_setting) -> None:
        check(self.beta >= 0, "{teacher.beta} must be >= 0 (inf: always the better one)")
        within(check, "teacher.gamma", self.gamma, 0, 1, "(]")
        within(check, "teacher.mistake", self.mistake, 0, 1, "[]")
        # Shares of the range of returns seen: 1 already skips (or ties) every pair.
        within(check, "teacher.skip_threshold", self.skip_threshold, 0, 1, "[]")
        within(check, "teacher.equal_threshold", self.equal_threshold, 0, 1, "[]")
        check(
            self.target is None or self.reward is None,
            "{teacher.target} and {teacher.reward} cannot both be set: choose one",
        )
        check(
            self.reward is None or _is_spec(self.reward),
            "{teacher.reward} must be MODULE:FUNCTION (e.g. mypkg.rewards:speed or"
            " path/to/rewards.py:speed); got ",
            repr(self.reward),
        )


def _is_spec(spec: str) -> bool:
    module, _, name = spec.rpartition(":")
    return bool(module) and name.isidentifier()


@dataclass(frozen=True)
class VideoConfig:
    """How segments are rendered for the human."""

    width: int = 256
    """Width of one clip in pixels (the pair video is twice as wide)."""
    height: int = 256
    """Height in pixels."""
    shadows: bool = False
    """Render shadows (slow on software GL)."""
    reflections: bool = False
    """Render floor reflections (slow on software GL)."""
    fps: Annotated[float | None, tyro.conf.arg(metavar="FLOAT")] = None
    """Frames per second; None plays the segment at real time (1 / env dt)."""
    ready_ahead: int = 6
    """The fewest pairs the render workers keep ready (or rendering) ahead of the labeller. They
    keep more for a fast labeller: twice the answers given during one render (at least 3 s of
    answers), plus one per render process, up to --video.ready-ahead-max. Other work on the
    machine lengthens each render, so it raises the number by itself."""
    ready_ahead_max: int = 24
    """The most pairs kept ready (or rendering) for a fast labeller; the same number as
    --video.ready-ahead keeps a fixed number. More costs render time the trainer could have
    had, and pairs a newer policy retires before anyone sees them."""
    render_processes: int = 0
    """Render processes; 0: one per core but the trainer's, at least 2, at most 4."""
    antialias: bool = False
    """4x multisampling: smoother edges, at a much longer render time on software GL (measured:
    docs/results/settings.md)."""

    def validate(self, check: Check = check_setting) -> None:
        at_least(check, "video.width", self.width, 16, 4096)
        at_least(check, "video.height", self.height, 16, 4096)
        above(check, "video.fps", self.fps, 0, 1000.0)
        at_least(check, "video.ready_ahead", self.ready_ahead, 1, 1000)
        at_least(check, "video.ready_ahead_max", self.ready_ahead_max, 1, 1000)
        at_least(check, "video.render_processes", self.render_processes, 0, 64)


@dataclass(frozen=True)
class WebConfig:
    """The labelling web server (human feedback)."""

    host: str = "127.0.0.1"
    """Interface to bind. Anything but loopback requires the printed token."""
    port: int = 0
    """Port to bind; 0 picks a free one."""
    token: Annotated[str | None, tyro.conf.arg(metavar="TOKEN")] = None
    """Access token; generated when the host is not loopback and none is given."""
    open_browser: bool = False
    """Open the labelling page in the default browser when the server starts."""
    finish_grace: float = 10.0
    """Seconds the labelling server keeps accepting answers still in flight after the run ends."""
    labeller: Annotated[
        tuple[str, ...], tyro.conf.UseAppendAction, tyro.conf.arg(metavar="NAME")
    ] = ()
    """A named labeller (repeat the flag for each): each gets an access link of their own,
    printed on the terminal, and every label records who gave it. None: one anonymous labeller."""
    labellers_file: Annotated[str | None, tyro.conf.arg(metavar="FILE")] = None
    """A file of labeller names, one a line (# comments), added to the --labeller names."""
    overlap: float = 0.0
    """With named labellers: the share of pairs also shown to a second labeller, to measure
    how often two people agree (e.g. 0.1)."""

    def validate(self, check: Check = check_setting) -> None:
        within(check, "web.port", self.port, 0, 65535, "[]")
        at_least(check, "web.finish_grace", self.finish_grace, 0, 3600.0)
        within(check, "web.overlap", self.overlap, 0, 1, "[]")
        try:  # reads --labellers-file
            labeller_names(self.labeller, self.labellers_file)
        except LabellerError as exc:
            raise ConfigError(str(exc)) from None
