"""Run configuration: nested frozen dataclasses, parsed from the command line by tyro.

Every field's docstring is its ``--help`` text. The common flags live at the top level
(``--env-id``, ``--total-timesteps`` ...); PPO hyperparameters keep CleanRL's flat names
(``--learning-rate``, ``--num-steps`` ...); the other sections are prefixed (``--reward-model.*``).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import PureWindowsPath
from typing import Annotated, Any, Literal

import tyro

from rlhf.config import paths as config_paths
from rlhf.config.agents import PPOConfig, SACConfig
from rlhf.config.errors import ConfigError, name_flags_of
from rlhf.config.errors import check_setting as _check
from rlhf.config.errors import command_check as command_check  # re-exported: commands use them
from rlhf.config.errors import flag as flag
from rlhf.config.errors import render_flags as render_flags
from rlhf.config.ranges import (
    BIG,
    STEPS_MAX,
    above,
    at_least,
    seed,
)
from rlhf.config.ratings import DataConfig, RatingScale, RatingsConfig
from rlhf.config.sections import (
    QueryConfig,
    RewardConfig,
    TeacherConfig,
    VideoConfig,
    WebConfig,
)

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
    max_minutes: float = 0.0
    """Also end the run after this many minutes of training (every session of a resumed run
    together, waits for labels included), as when its steps are spent; 0: no limit. Where it
    ends then depends on the machine's speed: summary.json has the steps it reached. The label
    schedule then spreads its labels over the steps the run reaches in that time at its pace."""
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
        at_least(_check, "max_minutes", self.max_minutes, 0, 525_600.0)  # a year
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
            not (self.sac.her and self.sac.recent_share),
            "{sac.recent_share} draws from the plain replay buffer, not {sac.her}'s episodes",
        )
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
            section.validate(_check)  # looked up now: a test swaps it for a recorder
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


name_flags_of(Config)
