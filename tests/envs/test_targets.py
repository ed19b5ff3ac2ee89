"""The catalogue of target behaviours (``--teacher.target``): each formula against values worked out
by hand from recorded states of the real env, each learnable from random actions, each refusal
one line, and the guide's table in step with the catalogue."""

from __future__ import annotations

import ast
import inspect
import itertools
import re
import textwrap
from pathlib import Path

import gymnasium as gym
import mujoco
import numpy as np
import pytest

from rlhf.config import ConfigError, TeacherConfig
from rlhf.envs import make_env, with_target
from rlhf.envs.targets import BODIES, TARGETS, RunTarget, target_fn, target_names

CASES = [(name, fam) for name, t in TARGETS.items() for fam in t.families]
GUIDE = Path(__file__).resolve().parents[2] / "docs" / "guide" / "synthetic.md"

STAND = {"HalfCheetah": 0.7, "Hopper": 1.25, "Walker2d": 1.25}
LOW = {"HalfCheetah": 0.55, "Walker2d": 1.0, "Ant": 0.45}
SPEED = {"Swimmer": 0.1}  # else 1 m/s
FALLERS = ("Hopper", "Walker2d", "Ant")  # their episodes end when they fall
ALIVE_CASES = [(name, fam) for name, fam in CASES if fam in FALLERS and name != "backflip"]
"""backflip has no alive term: a flip leaves the healthy range (Hopper's pitch: 0.2 rad)."""


def _record(env_id: str, steps: int, seed: int = 3) -> list[dict]:
    """Random-action steps of the real env (reset when it ends), each with what a target is
    called with and what the env itself says: its healthy flag and the torso height from
    MuJoCo's own kinematics."""
    env = gym.make(env_id)
    sim = env.unwrapped
    obs, _ = env.reset(seed=seed)
    env.action_space.seed(seed)
    scratch = mujoco.MjData(sim.model)
    rows = []
    for _ in range(steps):
        action = env.action_space.sample()
        next_obs, _, terminated, truncated, _ = env.step(action)
        scratch.qpos[:] = sim.data.qpos
        mujoco.mj_kinematics(sim.model, scratch)  # step() leaves xpos one step behind
        rows.append(
            {
                "obs": obs, "action": action, "next_obs": next_obs,
                "qpos": sim.data.qpos.copy(), "qvel": sim.data.qvel.copy(),
                "healthy": float(getattr(sim, "is_healthy", True)),  # HalfCheetah, Swimmer: up
                "torso_z": float(scratch.body("torso").xpos[2]),
            }
        )  # fmt: skip
        obs = next_obs
        if terminated or truncated:
            obs, _ = env.reset()
    env.close()
    return rows


def _near(x: float, s: float) -> float:
    return 1 / (1 + (x / s) ** 2)


def _at_least(x: float, s: float) -> float:
    return 1.0 if x >= s else _near(s - x, s / 2)


def _match(name: str, fam: str, row: dict) -> float:
    """m, how well the step matches the behaviour, written out from the env's own figures."""
    v, vz, w, h = row["qvel"][0], row["qvel"][1], row["qvel"][2], row["torso_z"]
    vs = SPEED.get(fam, 1.0)
    if name == "speed":
        return _near(v - vs, vs / 2)
    if name == "backward":
        return _at_least(-v, vs)
    if name == "stand":
        return _near(v, vs / 2)
    if name == "hop":
        return _at_least(abs(vz), vs) * _near(v, vs / 2)
    if name == "jump":
        return _at_least(h - STAND[fam], 0.2)
    if name == "backflip":
        return _at_least(-w, 2 * np.pi)
    if name == "crawl":
        return _at_least(v, vs) * _near(max(h - LOW[fam], 0), 0.1)
    raise AssertionError(f"no hand formula for {name}: add one")


def _by_hand(name: str, fam: str, row: dict) -> float:
    """The catalogue's reward for one step: alive x (1 + 4 m) / 5 x effort."""
    effort = 1 - 0.2 * np.mean(np.square(np.clip(row["action"], -1, 1)))
    alive = 1.0 if name == "backflip" else row["healthy"]
    return alive * (1 + 4 * _match(name, fam, row)) / 5 * effort


@pytest.mark.parametrize(("name", "fam"), CASES)
def test_each_target_matches_its_formula_on_recorded_states(name: str, fam: str) -> None:
    env_id = f"{fam}-v5"
    rows = _record(env_id, 400, seed=5) if fam == "Ant" else _record(env_id, 60)  # falls later
    batch = {
        k: np.stack([r[k] for r in rows]) for k in ("obs", "action", "next_obs", "qpos", "qvel")
    }
    got = target_fn(name, env_id)(**batch)
    expected = np.array([_by_hand(name, fam, r) for r in rows])
    assert got.shape == (len(rows),)
    np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-6)  # float32 actions
    if (name, fam) in ALIVE_CASES:
        assert {r["healthy"] for r in rows} == {0.0, 1.0}  # the alive term was tried both ways
    assert len({round(m, 3) for m in (_match(name, fam, r) for r in rows)}) > 5  # not flat


@pytest.mark.parametrize(
    ("name", "env_id", "qvel0", "expected"),
    [  # a still robot at the reset pose, no action (effort 1)
        ("speed", "HalfCheetah-v5", 1.0, 1.0),  # at v*: the most a step pays
        ("speed", "Hopper-v5", 0.5, (1 + 4 * 0.5) / 5),  # v* / 2 off: m = 1/2
        ("speed", "Walker2d-v5", 0.0, (1 + 4 * 0.2) / 5),  # still: v* off, m = 1/5
        ("speed", "Swimmer-v5", 0.1, 1.0),  # Swimmer's v* is 0.1 m/s
        ("backward", "HalfCheetah-v5", -20.0, 1.0),  # at least v* backwards: in full
        ("backward", "Ant-v5", 0.5, (1 + 4 / 10) / 5),  # 1.5 m/s short of v*: 3 x v*/2
        ("stand", "Walker2d-v5", 0.5, (1 + 4 * 0.5) / 5),
        ("crawl", "Walker2d-v5", 1.0, (1 + 4 / (1 + 2.5**2)) / 5),  # torso 1.25: 0.25 over 1.0
    ],
)
def test_the_terms_by_hand(name: str, env_id: str, qvel0: float, expected: float) -> None:
    env = gym.make(env_id)
    env.reset(seed=0)
    qpos, qvel = env.unwrapped.init_qpos[None].copy(), np.zeros((1, env.unwrapped.model.nv))
    env.close()
    qvel[0, 0] = qvel0
    obs = np.zeros((1, 3))
    action = np.zeros((1, 2))
    got = target_fn(name, env_id)(obs=obs, action=action, next_obs=obs, qpos=qpos, qvel=qvel)
    assert got == pytest.approx([expected])


def test_effort_costs_a_fifth_at_full_controls() -> None:
    qpos, qvel = np.zeros((3, 9)), np.zeros((3, 9))
    qvel[:, 0] = 1.0  # HalfCheetah at v*: m = 1
    action = np.array([[0.0] * 6, [1.0, -1.0] * 3, [5.0] * 6])  # beyond the bounds: clipped
    got = target_fn("speed", "HalfCheetah-v5")(obs=None, action=action, next_obs=None,
                                               qpos=qpos, qvel=qvel)  # fmt: skip
    assert got == pytest.approx([1.0, 0.8, 0.8])


def _healthy_extremes(env: gym.Env, rng: np.random.Generator, n: int) -> dict:
    """Healthy states by the env's own test, with velocities from 0.1 to 1000 and actions from
    still to beyond the action space's bounds."""
    sim, fam = env.unwrapped, env.spec.id.split("-")[0]
    z = 2 if fam == "Ant" else 1
    qpos = sim.init_qpos + rng.normal(0, 0.1, (n, sim.model.nq))
    qpos[:, z] = rng.uniform(0.1, 1.2, n) if fam == "Ant" else rng.uniform(0.5, 2.5, n)
    qvel = rng.normal(0, 1, (n, sim.model.nv)) * 10 ** rng.uniform(-1, 3, (n, 1))
    healthy = []
    for p, q in zip(qpos, qvel, strict=True):
        sim.set_state(p, q)
        healthy.append(sim.is_healthy)
    action = rng.uniform(-2, 2, (n, env.action_space.shape[0]))
    action[: n // 2] = np.sign(action[: n // 2])  # the largest control cost
    keep = np.array(healthy)
    assert keep.sum() >= 20, keep.sum()
    return {"action": action[keep], "qpos": qpos[keep], "qvel": qvel[keep]}


@pytest.mark.parametrize(("name", "fam"), ALIVE_CASES)
def test_a_step_alive_always_pays_more_than_ending(name: str, fam: str) -> None:
    """An ended episode earns nothing more, so a step that can pay less while the robot is up
    teaches it to fall (PPO on Walker2d's first speed did, at once). Every healthy step earns at
    least 0.2 x 0.8 (m = 0, every control at its bound): the reset pose with no action, recorded
    steps of random actions, and healthy states with extreme velocities and actions; a step
    after a fall earns nothing."""
    env_id = f"{fam}-v5"
    fn = target_fn(name, env_id)
    env = gym.make(env_id)
    env.reset(seed=0)
    sim = env.unwrapped
    still = fn(
        obs=None, action=np.zeros((1, env.action_space.shape[0])), next_obs=None,
        qpos=sim.data.qpos[None].copy(), qvel=sim.data.qvel[None].copy(),
    )  # fmt: skip
    extremes = _healthy_extremes(env, np.random.default_rng(1), 200)
    env.close()
    assert still[0] >= 0.2, still
    assert np.all(fn(obs=None, next_obs=None, **extremes) >= 0.16 - 1e-9)
    rows = _record(env_id, 400, seed=5) if fam == "Ant" else _record(env_id, 100)
    batch = {k: np.stack([r[k] for r in rows]) for k in ("action", "qpos", "qvel")}
    got = fn(obs=None, next_obs=None, **batch)
    healthy = np.array([r["healthy"] for r in rows]) > 0
    assert healthy.any() and not healthy.all()
    assert np.all(got[healthy] >= 0.16 - 1e-9), got[healthy].min()
    assert np.all(got[~healthy] == 0.0)


def test_staying_up_without_the_behaviour_pays_a_third_of_doing_it() -> None:
    """What the old catalogue got wrong: Hopper backward paid 11 a step for standing, and
    true-reward PPO learned to stand. Now standing still pays 0.36 against 1 for the behaviour."""
    fn = target_fn("backward", "Hopper-v5")
    qpos = np.array([[0.0, 1.25, 0.0, 0.0, 0.0, 0.0]] * 2)
    qvel = np.zeros((2, 6))
    qvel[1, 0] = -1.0  # backwards at v*
    got = fn(obs=None, action=np.zeros((2, 3)), next_obs=None, qpos=qpos, qvel=qvel)
    assert got == pytest.approx([0.36, 1.0])


def test_backflip_rewards_turning_nose_up_and_over() -> None:
    """rooty's positive direction turns the cheetah's front down; a backflip turns it back."""
    env = gym.make("HalfCheetah-v5")
    env.reset(seed=0)
    model, data = env.unwrapped.model, env.unwrapped.data
    data.qpos[:] = 0
    data.qpos[2] = 0.3
    mujoco.mj_kinematics(model, data)
    front, back = data.body("fthigh").xpos[2], data.body("bthigh").xpos[2]
    env.close()
    assert front < back  # +pitch: nose down, so the backflip is -w
    qvel = np.zeros((3, 9))
    qvel[:, 2] = [3.0, -3.0, -7.0]  # nose going down; up; up, faster than a turn a second
    none = np.zeros((3, 6))
    fn = target_fn("backflip", "HalfCheetah-v5")
    got = fn(obs=none, action=none, next_obs=none, qpos=np.zeros((3, 9)), qvel=qvel)
    assert got[0] < got[1] < got[2] == 1.0


@pytest.mark.parametrize(("name", "fam"), CASES)
def test_random_actions_give_a_spread_of_segment_returns(name: str, fam: str) -> None:
    """Learnable in principle: 10-step segments of random behaviour are not all worth the same
    (the least spread measured, backflip on HalfCheetah: std 0.04 of the mean; the bar: 0.01)."""
    env_id = f"{fam}-v5"
    env = with_target(make_env(env_id), RunTarget(name, target_fn(name, env_id)))
    env.reset(seed=5)
    env.action_space.seed(5)
    returns, ret, steps = [], 0.0, 0
    while len(returns) < 12:
        _, reward, terminated, truncated, _ = env.step(env.action_space.sample())
        ret, steps = ret + reward, steps + 1
        if steps == 10:
            returns.append(ret)
        if steps == 10 or terminated or truncated:
            ret, steps = 0.0, 0
        if terminated or truncated:
            env.reset()
    env.close()
    assert np.std(returns) > 0.01 * np.mean(returns), returns


def test_targets_pay_between_0_and_1_per_step() -> None:
    """Whatever the physics does (huge velocities, flying off), a step pays within [0, 1]."""
    rng = np.random.default_rng(0)
    for name, fam in CASES:
        env = gym.make(f"{fam}-v5")
        nq, nv, na = env.unwrapped.model.nq, env.unwrapped.model.nv, env.action_space.shape[0]
        env.close()
        qpos, qvel = rng.normal(0, 1e6, (64, nq)), rng.normal(0, 1e6, (64, nv))
        qvel[0] = np.nan  # a diverged simulation: a robot that can fall has fallen
        action = rng.uniform(-3, 3, (64, na))
        fn = target_fn(name, f"{fam}-v5")
        values = fn(obs=None, action=action, next_obs=None, qpos=qpos, qvel=qvel)
        finite = values[1:] if fam not in FALLERS or name == "backflip" else values
        assert np.all((finite >= 0) & (finite <= 1)), (name, fam)


def test_an_unknown_target_is_refused_in_one_line_with_the_valid_names() -> None:
    with pytest.raises(ConfigError) as err:
        target_fn("moonwalk", "Hopper-v5")
    message = str(err.value)
    assert "\n" not in message and message.startswith("--teacher.target moonwalk")
    assert message.endswith("choose one of: " + ", ".join(target_names("Hopper-v5")))
    assert target_names("Hopper-v5") == ["backflip", "backward", "hop", "jump", "speed", "stand"]


def test_a_target_of_another_robot_says_whose_it_is() -> None:
    says = (
        r"^--teacher\.target backflip: not a target for Walker2d-v5 \(it is for HalfCheetah,"
        r" Hopper\); choose one of: backward, crawl, hop, jump, speed, stand$"
    )
    with pytest.raises(ConfigError, match=says):
        target_fn("backflip", "Walker2d-v5")
    with pytest.raises(
        ConfigError, match=r"Pendulum-v1 has no target behaviours.*--teacher\.reward"
    ):
        target_fn("speed", "Pendulum-v1")


def test_every_robot_of_the_catalogue_has_a_body() -> None:
    assert {fam for _, fam in CASES} == set(BODIES)
    assert {fam: b.speed for fam, b in BODIES.items() if b.speed != 1.0} == SPEED


def test_the_guide_lists_every_target_with_its_robots_and_formula() -> None:
    rows = {}
    for line in GUIDE.read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("|") and len(cells) >= 3 and re.fullmatch(r"`[a-z]+`", cells[0]):
            rows[cells[0].strip("`")] = cells
    assert set(rows) == set(TARGETS), "docs/guide/synthetic.md: the target table"
    for name, target in TARGETS.items():
        robots = {r.strip() for r in rows[name][1].split(",")}
        assert robots == set(target.families), name
        assert target.match in rows[name][2].replace("`", ""), name
        assert rows[name][2].startswith("`alive`,") == target.alive, name


def test_the_flags_help_names_every_target_with_its_robots() -> None:
    """--help lists the catalogue (the field's docstring), so it must follow it."""
    body = ast.parse(textwrap.dedent(inspect.getsource(TeacherConfig))).body[0].body
    docs = {
        node.target.id: after.value.value
        for node, after in itertools.pairwise(body)
        if isinstance(node, ast.AnnAssign) and isinstance(after, ast.Expr)
    }
    text = " ".join(docs["target"].split())
    for name in TARGETS:
        assert name in text, name
    listed = re.findall(
        r"([a-z]+(?:, [a-z]+)*) \(([A-Z][A-Za-z0-9]+(?:, [A-Z][A-Za-z0-9]+)*)\)", text
    )
    robots = {
        name: tuple(group.split(", ")) for names, group in listed for name in names.split(", ")
    }
    assert robots == {name: t.families for name, t in TARGETS.items()}
