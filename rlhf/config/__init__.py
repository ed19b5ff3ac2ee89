"""Run configuration: nested frozen dataclasses, parsed from the command line by tyro.

Every field's docstring is its ``--help`` text. The common flags live at the top level
(``--env-id``, ``--total-timesteps`` ...); PPO hyperparameters keep CleanRL's flat names
(``--learning-rate``, ``--num-steps`` ...); the other sections are prefixed (``--reward-model.*``).
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import PureWindowsPath
from typing import Annotated, Any, Literal

import tyro

from rlhf.config import paths as config_paths
from rlhf.config.agents import PPOConfig, SACConfig
from rlhf.config.ranges import (
    BIG,
    STEPS_MAX,
    WIDTH_MAX,
    Check,
    above,
    at_least,
    seed,
    within,
)
from rlhf.config.ratings import DataConfig, RatingScale, RatingsConfig
from rlhf.core.labellers import LabellerError, labeller_names


class ConfigError(ValueError):
    """A configuration value is out of range; the message is one line for the user."""


_FIELD = re.compile(r"\{([a-z_.]+)\}")


def flag(path: str) -> str:
    """The ``rlhf train`` flag of a setting: ``query.total_labels`` -> ``--query.total-labels``."""
    return config_paths.flag(Config, path)


def render_flags(template: str) -> str:
    """``template`` with each ``{path}`` replaced by that setting's flag."""
    return _FIELD.sub(lambda m: flag(m.group(1)), template)


def _check(cond: bool, template: str, suffix: str = "") -> None:
    """Raise a one-line :class:`ConfigError` unless ``cond``.

    Messages name settings as ``{path}`` (e.g. ``{query.total_labels}``), never as a spelled-out
    flag, so a message always names the flag ``--help`` shows. ``suffix`` (a user's value) is
    appended as is, so braces in it are never taken for a setting.
    """
    if not cond:
        raise ConfigError(render_flags(template) + suffix)


def command_check(root: type) -> Check:
    """A :func:`_check` for another command's settings: ``{path}`` names a field of ``root``
    (e.g. ``{test_fraction}`` of ``rlhf reward fit`` is ``--test-fraction``)."""

    def check(cond: bool, template: str, suffix: str = "") -> None:
        if not cond:
            named = _FIELD.sub(lambda m: config_paths.flag(root, m.group(1)), template)
            raise ConfigError(named + suffix)

    return check


NAME_MAX = 255
"""Longest file name in bytes (most file systems)."""


def check_run_name(name: str) -> None:
    """Refuse a run name that is not one plain directory name of printable characters: it must
    stay inside --runs-dir (never be '.', '..' or hold a separator), and be shown on one line by
    ``rlhf runs list`` and in paths (no newline, tab or other control character)."""
    plain = (
        bool(name)
        and ".." not in name
        and name != "."
        and not any(c in name for c in "/\\")
        and not PureWindowsPath(name).drive  # C:name would leave runs_dir on Windows
    )
    _check(
        plain,
        "{run_name} must be a plain directory name (no '/', '\\', '.', '..' or absolute path)",
        f": {name!r}",
    )
    _check(
        name.isprintable() and name.strip() == name,
        "{run_name} must be printable characters without leading or trailing spaces"
        " (no newline, tab or control character)",
        f": {name!r}",
    )
    _check(not name.startswith("-"), "{run_name} must not start with '-' (it reads as a flag)")
    _check(
        len(name.encode("utf-8", "surrogateescape")) <= NAME_MAX,
        f"{{run_name}} must be at most {NAME_MAX} bytes long",
    )


@dataclass(frozen=True)
class RewardConfig:
    """The learned reward: an ensemble of MLPs trained with the Bradley-Terry loss."""

    ensemble_size: int = 3
    """Number of reward models in the ensemble."""
    hidden_sizes: tuple[int, ...] = (64, 64)
    """Hidden layer widths of each member (Christiano et al. used two layers of 64 for MuJoCo)."""
    learning_rate: float = 1e-3
    """Adam learning rate of the reward models."""
    weight_decay: float = 0.0
    """Adam (decoupled) weight decay."""
    dropout: float = 0.0
    """Dropout probability in training (prediction always runs in eval mode)."""
    batch_size: int = 64
    """Pairs per gradient step."""
    max_epochs: int = 30
    """Upper bound on epochs over all labels per training round."""
    min_epoch_steps: Annotated[int | None, tyro.conf.arg(metavar="INT")] = None
    """Gradient steps an epoch makes at least: with few labels it passes over them several
    times, so early stopping does not end a first round near chance (140 training labels are 3
    steps a pass). Default: the env's preset (32 on Walker2d; rlhf/config/presets.py), else 1 (one
    pass per epoch)."""
    output_init: Annotated[
        Literal["random", "zero"] | None, tyro.conf.arg(metavar="{random,zero}")
    ] = None
    """How each member's output layer starts. zero: an untrained member predicts 0 (every pair a
    tie), so a round that stops early leaves a flat reward instead of a random one, and those
    ties do not compete in early stopping. Default: the env's preset (zero on Walker2d), else
    random (PyTorch's default)."""
    label_noise: float = 0.1
    """Share of answers the reward model assumes were given at random (a person gets about one
    in ten wrong): P(left) = (1 - e) sigmoid(R_left - R_right) + e/2 (Christiano et al. 2017), so
    a wrong answer cannot outweigh the answers that agree with each other. 0: the plain
    Bradley-Terry loss (measured: docs/results/settings.md)."""
    patience: int = 3
    """Stop a round after this many epochs without a better validation loss."""
    val_fraction: float = 0.2
    """Share of labels held out for validation (and early stopping)."""
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

    def validate(self) -> None:
        at_least(_check, "reward_model.ensemble_size", self.ensemble_size, 1, 100)
        _check(len(self.hidden_sizes) <= 16, "{reward_model.hidden_sizes} takes at most 16 layers")
        for width in self.hidden_sizes:  # a zero-width layer would train a net that is constant
            at_least(_check, "reward_model.hidden_sizes", width, 1, WIDTH_MAX)
        above(_check, "reward_model.learning_rate", self.learning_rate, 0, 1.0)
        at_least(_check, "reward_model.weight_decay", self.weight_decay, 0, 100.0)
        within(_check, "reward_model.dropout", self.dropout, 0, 1, "[)")
        within(_check, "reward_model.val_fraction", self.val_fraction, 0, 1, "[)")
        at_least(_check, "reward_model.batch_size", self.batch_size, 1, 10**6)
        at_least(_check, "reward_model.max_epochs", self.max_epochs, 1, 10**6)
        within(_check, "reward_model.label_noise", self.label_noise, 0, 1, "[)")
        at_least(_check, "reward_model.min_epoch_steps", self.min_epoch_steps, 1, 10**6)
        at_least(_check, "reward_model.patience", self.patience, 1, 10**6)  # 0: no epoch at all
        at_least(_check, "reward_model.retrain_growth", self.retrain_growth, 0, 100.0)


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
    pool_size: int = 2000
    """Recent segments kept as candidates."""
    selection: Literal["uniform", "disagreement", "entropy"] = "disagreement"
    """How candidate pairs are ranked: at random, by ensemble std of P(left>right), or by entropy."""
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

    def validate(self) -> None:
        at_least(_check, "query.total_labels", self.total_labels, 0, 10**7)
        within(_check, "query.initial_fraction", self.initial_fraction, 0, 1, "[]")
        # A clip a person watches: ten minutes is already far longer than anyone can judge.
        above(_check, "query.segment_seconds", self.segment_seconds, 0, 600.0)
        at_least(_check, "query.segment_length", self.segment_length, 1, 10**6)
        at_least(_check, "query.oversample", self.oversample, 1, 10_000)
        at_least(_check, "query.pool_size", self.pool_size, 2, 10**7)
        at_least(_check, "query.retire_after", self.retire_after, 0, BIG)
        at_least(_check, "query.half_rate_steps", self.half_rate_steps, 1, STEPS_MAX)
        within(_check, "query.replay_share", self.replay_share, 0, 1, "[]")


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

    def validate(self) -> None:
        _check(self.beta >= 0, "{teacher.beta} must be >= 0 (inf: always the better one)")
        within(_check, "teacher.gamma", self.gamma, 0, 1, "(]")
        within(_check, "teacher.mistake", self.mistake, 0, 1, "[]")
        # Shares of the range of returns seen: 1 already skips (or ties) every pair.
        within(_check, "teacher.skip_threshold", self.skip_threshold, 0, 1, "[]")
        within(_check, "teacher.equal_threshold", self.equal_threshold, 0, 1, "[]")
        _check(
            self.target is None or self.reward is None,
            "{teacher.target} and {teacher.reward} cannot both be set: choose one",
        )
        _check(
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

    def validate(self) -> None:
        at_least(_check, "video.width", self.width, 16, 4096)
        at_least(_check, "video.height", self.height, 16, 4096)
        above(_check, "video.fps", self.fps, 0, 1000.0)
        at_least(_check, "video.ready_ahead", self.ready_ahead, 1, 1000)
        at_least(_check, "video.ready_ahead_max", self.ready_ahead_max, 1, 1000)
        at_least(_check, "video.render_processes", self.render_processes, 0, 64)


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

    def validate(self) -> None:
        within(_check, "web.port", self.port, 0, 65535, "[]")
        at_least(_check, "web.finish_grace", self.finish_grace, 0, 3600.0)
        within(_check, "web.overlap", self.overlap, 0, 1, "[]")
        try:  # reads --labellers-file
            labeller_names(self.labeller, self.labellers_file)
        except LabellerError as exc:
            raise ConfigError(str(exc)) from None


@dataclass(frozen=True)
class Config:
    """rlhf train: teach a MuJoCo agent a behaviour from preferences.

    Start with these flags (the expert ones follow them, grouped by section):
    --env-id, --total-timesteps, --query.total-labels (the label budget),
    --feedback (human or synthetic), --task, --host/--port (the labelling page),
    --run-name/--runs-dir, --seed, --resume."""

    # The flags a person needs first come first: tyro lists the top-level fields in this order,
    # above the sections (in theirs). Fields are read and written by name everywhere (to_dict,
    # from_dict, config.json), so their order is free to follow --help.
    env_id: str = "HalfCheetah-v5"
    """Gymnasium environment id (continuous actions)."""
    total_timesteps: int = 1_000_000
    """Environment steps over the whole run (all envs together)."""
    feedback: Literal["human", "synthetic"] = "human"
    """Where preference labels come from (with --reward learned)."""
    task: str = ""
    """What to teach, in words (e.g. "run backwards"): shown above the videos, kept with the run."""
    seed: int = 1
    """One seed makes the whole run reproducible."""
    run_name: Annotated[str | None, tyro.conf.arg(metavar="NAME")] = None
    """Name of the run directory; default <env>__<reward>__<seed>__<timestamp>."""
    runs_dir: str = "runs"
    """Parent directory of run directories."""
    resume: Annotated[str | None, tyro.conf.arg(metavar="DIR")] = None
    """Continue the run in this directory (e.g. runs/NAME) from its last checkpoint, with its
    stored configuration. Flags may raise --total-timesteps and --query.total-labels and change
    this session's settings (--device, --progress, --port ...); any other change is refused."""
    reward: Literal["learned", "env"] = "learned"
    """Train PPO on the learned reward (RLHF) or on the true env reward (baseline; the target's
    with --teacher.target)."""
    algo: Literal["ppo", "sac"] = "ppo"
    """The RL algorithm: PPO (on-policy), or SAC on a replay buffer whose rewards follow the
    latest learned reward, with PEBBLE's unsupervised pretraining (see the sac section)."""
    feedback_kind: Literal["pairs", "ratings", "both"] = "pairs"
    """What a teacher is asked: to compare two clips (pairs), to grade one clip on the grade
    scale of --ratings.levels/--ratings.names (ratings), or both, in turn."""
    feedback_wait: bool = False
    """Block PPO until the initial share of labels has arrived (human feedback)."""
    feedback_pace: bool = True
    """Human feedback: when the labeller is behind the label schedule, PPO waits between
    iterations until every pair asked so far is answered, instead of spending the step budget
    on a stale reward (the page and the terminal say so). --no-feedback-pace: PPO runs freely."""
    labels_from: Annotated[str | None, tyro.conf.arg(metavar="DATASET_OR_RUN")] = None
    """Seed this run's labels with every label of an earlier run (its directory) or of a dataset
    written by rlhf export: the reward trains on them from the first iteration; the label
    schedule (--query.total-labels) counts only the labels asked in this run."""
    reward_model_file: Annotated[str | None, tyro.conf.arg(name="reward-model", metavar="FILE")] = (
        None
    )
    """Train on a saved reward and ask for no labels: a file written by rlhf reward fit, or a
    run's checkpoints/reward_model.pt (its env and obs/action sizes must be this run's)."""
    device: Literal["auto", "cpu", "cuda"] = "auto"
    """Torch device for the networks; auto uses CUDA when present."""
    num_envs: int = 1
    """Parallel environments (synchronous vector env)."""
    progress: bool = True
    """Show a tqdm progress bar."""
    checkpoint_every: int = 0
    """Write a checkpoint every this many PPO iterations; 0: about every --checkpoint-minutes."""
    checkpoint_minutes: float = 5.0
    """Minutes of wall time between checkpoints when --checkpoint-every is 0."""
    policy_clip_every: Annotated[int | None, tyro.conf.arg(metavar="N")] = None
    """Every this many iterations, a clip of the current policy (from its rollout's recorded
    states) is rendered for the page and TensorBoard (videos/policy); 0: off. Default (None): 10
    with --feedback human, off otherwise; a value > 0 with --feedback synthetic starts one
    background render process for them."""
    env_kwargs: Annotated[str, tyro.conf.arg(metavar="JSON")] = "{}"
    """Keyword arguments for the env as a JSON object, e.g. '{"ctrl_cost_weight": 0.1}'."""
    terminations: Literal["auto", "absorbing", "fixed-horizon", "standard"] = "auto"
    """How episodes that the env ends early (a fall) meet a learned reward, which cannot see an
    episode's end: absorbing: segments that reach an end are padded with an absorbing state whose
    reward is learned too, and PPO values an end as staying there (Kostrikov et al. 2019);
    fixed-horizon: episodes never end early (seals); standard: as the env says, which leaks the
    reward's sign into the policy; auto: absorbing with a learned reward, standard with --reward
    env. The true return reported is always the standard env's."""
    torch_threads: int = 1
    """Torch CPU threads in the trainer (1 is fastest on small, shared machines)."""
    query: QueryConfig = field(default_factory=QueryConfig)
    """Segment and query selection settings."""
    web: Annotated[WebConfig, tyro.conf.OmitArgPrefixes] = field(default_factory=WebConfig)
    """Web server settings (--feedback human): --host, --port, --token, --open-browser."""
    video: VideoConfig = field(default_factory=VideoConfig)
    """Video rendering settings (--feedback human)."""
    teacher: TeacherConfig = field(default_factory=TeacherConfig)
    """Synthetic teacher settings (--feedback synthetic)."""
    reward_model: RewardConfig = field(default_factory=RewardConfig)
    """Reward ensemble settings."""
    ratings: RatingsConfig = field(default_factory=RatingsConfig)
    """The grade scale (--feedback-kind ratings or both)."""
    data: DataConfig = field(default_factory=DataConfig)
    """Weighted sampling of labelled data for reward training."""
    ppo: Annotated[PPOConfig, tyro.conf.OmitArgPrefixes] = field(default_factory=PPOConfig)
    """PPO hyperparameters (--algo ppo)."""
    sac: SACConfig = field(default_factory=SACConfig)
    """SAC and PEBBLE settings (--algo sac)."""

    def clip_every(self) -> int:
        """--policy-clip-every resolved: None means 10 with human feedback, 0 (off) otherwise."""
        if self.policy_clip_every is None:
            return 10 if self.feedback == "human" else 0
        return self.policy_clip_every

    def validate(self) -> Config:
        """Raise :class:`ConfigError` with a one-line message on the first bad value."""
        if self.run_name is not None:
            check_run_name(self.run_name)
        at_least(_check, "total_timesteps", self.total_timesteps, 1, STEPS_MAX)
        seed(_check, "seed", self.seed)
        at_least(_check, "num_envs", self.num_envs, 1, 1024)
        at_least(_check, "torch_threads", self.torch_threads, 1, 1024)
        at_least(_check, "checkpoint_every", self.checkpoint_every, 0, BIG)
        above(_check, "checkpoint_minutes", self.checkpoint_minutes, 0, 10_080.0)  # a week
        at_least(_check, "policy_clip_every", self.clip_every(), 0, BIG)
        self.env_kwargs_dict()
        _check(
            self.labels_from is None or self.reward == "learned",
            "{labels_from} needs {reward} learned",
        )
        if self.reward_model_file is not None:
            _check(self.reward == "learned", "{reward_model_file} needs {reward} learned")
            _check(self.labels_from is None, "{labels_from} has no use with {reward_model_file}")
        _check(self.algo == "sac" or not self.sac.her, "{sac.her} needs {algo} sac")
        _check(
            not (self.sac.her and self.reward == "env" and self.teacher.target_name),
            "{sac.her} with {reward} env relabels goals with the env's own reward, not the"
            " target of {teacher.target}/{teacher.reward}",
        )
        _check(
            self.algo != "ppo" or self.ppo.num_steps * self.num_envs >= self.ppo.num_minibatches,
            "{ppo.num_steps} x {num_envs} must be >= {ppo.num_minibatches}",
        )
        for section in (
            self.query,
            self.reward_model,
            self.teacher,
            self.video,
            self.web,
        ):
            section.validate()
        self.ppo.validate(_check)
        self.sac.validate(_check)
        self.ratings.validate(_check)
        self.data.validate(_check)
        return self

    def env_kwargs_dict(self) -> dict[str, Any]:
        """``env_kwargs`` parsed; a one-line :class:`ConfigError` unless it is a JSON object."""
        try:
            kwargs = json.loads(self.env_kwargs)
        except ValueError:
            kwargs = None
        _check(
            isinstance(kwargs, dict),
            "{env_kwargs} must be a JSON object, e.g. '{\"ctrl_cost_weight\": 0.1}'; got ",
            repr(self.env_kwargs),
        )
        return kwargs  # type: ignore[return-value]

    def rating_scale(self) -> RatingScale:
        """The grade scale of --ratings.* (a one-line ConfigError when it is not one)."""
        return self.ratings.scale(_check)

    @property
    def termination_mode(self) -> str:
        """``terminations`` with auto resolved: absorbing, fixed-horizon or standard."""
        if self.terminations == "auto":
            return "absorbing" if self.reward == "learned" else "standard"
        return self.terminations

    @property
    def batch_size(self) -> int:
        """Transitions per iteration (all envs): a PPO rollout, or SAC's steps between two
        preference rounds."""
        if self.algo == "sac":
            return self.sac.iteration_steps * self.num_envs
        return self.ppo.num_steps * self.num_envs

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Config:
        """The config :meth:`to_dict` produced (e.g. read back from a run's ``config.json``).

        Keys missing from ``data`` keep their defaults (files written before a setting existed).

        Raises:
            ConfigError: unknown keys (all named in one line) or a value of the wrong type.
        """
        try:
            return config_paths.build(cls, data)
        except config_paths.UnreadableConfig as exc:
            raise ConfigError(str(exc)) from None
