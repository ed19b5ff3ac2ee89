"""The jobs of bench_rlhf.py: one run's settings as a Job (its key names its result's file), and
the benchmark's flags turned into checked job settings (--set, the teachers, the presets resolved).

Imports no other part of the benchmark but its shared modules, so the script, its runs and its
command line all take the Job and its settings from here.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any, Literal

from _bench_grid import with_settings
from _bench_rlhf_table import Teacher

from rlhf.config import Config, ConfigError, PPOConfig, QueryConfig, TeacherConfig, flag
from rlhf.config.presets import learned_end, with_preset
from rlhf.sweep.grid import cell_name
from rlhf.sweep.spec import SpecError, key_name, settings_from_flags

KIND_MODES = {"pairs": "rlhf", "ratings": "ratings", "both": "both"}
"""--feedback-kind -> the mode of its runs ("rlhf": pairs, the name results on disk already use)."""
LEARNED = {"rlhf": "pairs", "ratings": "ratings", "both": "both"}
"""Learned-reward mode -> the run's --feedback-kind."""
TEACHER = {
    "teacher.beta": "--beta",
    "teacher.gamma": "--myopia",
    "teacher.mistake": "--mistake",
    "teacher.skip_threshold": "--skip-threshold",
    "teacher.equal_threshold": "--equal-threshold",
}
"""The teacher's noise settings (rlhf train's --teacher.*) -> the benchmark's flag for each
(--myopia: rlhf train's --gamma is PPO's discount, as --set gamma= is here)."""


@dataclass(frozen=True)
class Job:
    env_id: str
    mode: str
    seed: int
    steps: int
    labels: int
    """RLHF's label budget (--query.total-labels); PPO's jobs have none (0)."""
    init_log_std: float = 0.0
    """PPO's --init-log-std, the same for both modes."""
    replay_share: float = 0.0
    """RLHF's --query.replay-share (results saved before it existed ran without replays)."""
    end_value: Literal["zero", "absorbing"] = "absorbing"
    """RLHF's --end-value (results saved before it existed ran with absorbing; PPO on the true
    reward has no learned end, so its jobs keep absorbing and their results stay valid)."""
    end_margin: float = 0.0
    """RLHF's --end-margin (results saved before it existed ran with 0)."""
    settings: tuple[tuple[str, Any], ...] = ()
    """RLHF's further rlhf train settings (--set), as (config path, value)."""
    teacher: tuple[tuple[str, Any], ...] = ()
    """RLHF's teacher settings that differ from the perfect oracle's, as (config path, value)."""
    target: str | None = None
    """--target: the target behaviour both modes are measured on (--teacher.target); None: the
    env's own reward."""

    @property
    def key(self) -> str:
        """The result's file name: settings that differ from the general defaults (or, for the
        end value, from what results saved before it ran with) are in it, so a cached result is
        reused only for the same settings. PPO's has no teacher (not even the label budget,
        which results saved before had): one PPO run serves every teacher."""
        key = f"{self.env_id}__{self.mode}__{self.seed}__{self.steps}"
        key += "" if self.mode == "ppo" else f"__{self.labels}"
        key += f"__{cell_name((('target', self.target),))}" if self.target else ""
        key += f"__logstd{self.init_log_std:g}" if self.init_log_std else ""
        key += f"__end{self.end_value}" if self.end_value != "absorbing" else ""
        key += f"__margin{self.end_margin:g}" if self.end_margin else ""
        key += f"__replay{self.replay_share:g}" if self.replay_share else ""
        # The teacher first: a result of --set teacher.mistake=0.1 (before --mistake) keeps its key.
        own = self.teacher + self.settings
        return key + (f"__{cell_name(own)}" if own else "")

    @property
    def run_settings(self) -> tuple[tuple[str, Any], ...]:
        """What the run sets beyond the benchmark's own: the target, the teacher, --set."""
        target = (("teacher.target", self.target),) if self.target else ()
        return target + self.teacher + self.settings


OWN = {
    "env_id": "--env-id",
    "seed": "--seeds",
    "total_timesteps": "--steps",
    "query.total_labels": "--labels",
    "feedback_kind": "--feedback-kind",
    "ppo.init_log_std": "--init-log-std",
    "ppo.end_value": "--end-value",
    "ppo.end_margin": "--end-margin",
    "query.replay_share": "--replay-share",
    "teacher.target": "--target",
    **TEACHER,
}
"""Settings with a benchmark flag of their own (--set refuses them and names it)."""
FIXED = (
    "reward",
    "feedback",
    "reward_model_file",
    "labels_from",
    "resume",
    "progress",
    "device",
    "teacher.reward",  # a reward of one's own: for both modes, as --target's, or neither
)
"""Settings the benchmark needs as they are (what it compares, and how its runs run)."""


def checked(settings: tuple[tuple[str, Any], ...], what: str, env_id: str | None = None) -> None:
    """SpecError (one line, starting with ``what``) when ``settings`` are out of range (refused
    here, not by every RLHF run after PPO's)."""
    try:
        with_settings(Config(env_id=env_id or Config().env_id), settings).validate()
    except ConfigError as exc:
        message = str(exc)
        for path in ("query.total_labels", "teacher.target", *TEACHER):  # named as here
            message = message.replace(flag(path), OWN[path])
        raise SpecError(f"{what}: {message}") from None


def set_flags(items: list[str]) -> tuple[tuple[str, Any], ...]:
    """--set KEY=VALUE flags as checked settings; SpecError (one line) for a bad or owned key."""
    settings = settings_from_flags(items, "--set")
    for path, _ in settings:
        if path in OWN:
            raise SpecError(f"--set {key_name(path)}: the benchmark sets it; use its {OWN[path]}")
        if path in FIXED:
            raise SpecError(f"--set {key_name(path)}: the benchmark sets it to compare its runs")
    checked(settings, "--set")  # out of range (--set gamma=2)
    return settings


def make_teachers(labels: list[int], noise: dict[str, list[float] | None]) -> list[Teacher]:
    """Every combination of the label budgets and the values of each teacher flag (``noise``:
    teacher setting -> the values given, None: the perfect oracle's); SpecError (one line)
    for a value out of range."""
    oracle = TeacherConfig()
    axes = []
    for path, values in noise.items():
        default = getattr(oracle, path.split(".")[1])
        for value in values or []:
            checked(((path, value),), f"{TEACHER[path]} {value:g}")
        axes.append([(path, v) for v in dict.fromkeys(values or [default])])
    for n in labels:
        checked((("query.total_labels", n),), f"--labels {n}")
    teachers = []
    for n, *settings in itertools.product(dict.fromkeys(labels), *axes):
        mine = tuple((p, v) for p, v in settings if v != getattr(oracle, p.split(".")[1]))
        teachers.append(Teacher(n, mine))
    return teachers


def preset_settings(
    env_id: str,
    mode: str,
    log_std: float | None,
    share: float | None,
    margin: float | None,
    settings: tuple[tuple[str, Any], ...] = (),
) -> dict[str, float]:
    """--init-log-std, --query.replay-share and --end-margin as ``rlhf train`` resolves them for
    this job (with its --set settings): a value not given takes the env's preset
    (rlhf.config.presets.with_preset decides, as in a run). A margin given to a job without a
    learned end (PPO on the true reward, a fixed horizon) moves nothing there, so it is 0 in
    the job and its key: the true-reward baseline of a margin screen is the one already run."""
    cfg = Config(
        env_id=env_id,
        reward="env" if mode == "ppo" else "learned",
        ppo=PPOConfig(init_log_std=log_std, end_margin=margin),
        query=QueryConfig(replay_share=share),
    )
    resolved, _ = with_preset(with_settings(cfg, settings))
    return {
        "init_log_std": resolved.ppo.init_log_std or 0.0,
        "replay_share": resolved.query.replay_share or 0.0,
        "end_margin": (resolved.ppo.end_margin or 0.0) if learned_end(resolved) else 0.0,
    }
