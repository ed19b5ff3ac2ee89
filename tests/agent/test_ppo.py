"""PPO: reproducibility, learning on a cheap env, and that the pluggable reward is really used."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from rlhf.agent.collector import RolloutCollector
from rlhf.agent.ppo import ActorCritic, PPOBatch, ppo_update
from rlhf.agent.ppo_learner import PPOLearner
from rlhf.config import Config, PPOConfig
from rlhf.envs import make_vec_env
from rlhf.run.runner import run


def _cfg(tmp_path: Path, name: str, **kw) -> Config:
    base = dict(
        env_id="InvertedPendulum-v5",
        total_timesteps=1024,
        seed=3,
        reward="env",
        runs_dir=str(tmp_path),
        run_name=name,
        progress=False,
        ppo=PPOConfig(num_steps=256, num_minibatches=8, update_epochs=2),
    )
    base.update(kw)
    return Config(**base)


def test_same_seed_twice_gives_identical_runs(tmp_path: Path) -> None:
    first = run(_cfg(tmp_path, "a"))
    second = run(_cfg(tmp_path, "b"))
    third = run(_cfg(tmp_path, "c", seed=4))
    weights = [torch.load(tmp_path / n / "checkpoints" / "agent.pt")["agent"] for n in "abc"]
    for key in weights[0]:
        assert torch.equal(weights[0][key], weights[1][key]), key
    assert any(not torch.equal(weights[0][k], weights[2][k]) for k in weights[0])
    assert first.final_true_return == second.final_true_return
    assert first.episodes == second.episodes
    assert third.episodes != first.episodes or third.final_true_return != first.final_true_return


def test_run_writes_summary_config_and_tensorboard(tmp_path: Path) -> None:
    summary = run(_cfg(tmp_path, "s"))
    root = tmp_path / "s"
    data = json.loads((root / "summary.json").read_text())
    for key in ("env_steps", "wall_seconds", "sps", "final_true_return", "seed", "env_id"):
        assert key in data
    assert data["env_steps"] == summary.env_steps == 1024
    assert json.loads((root / "config.json").read_text())["env_id"] == "InvertedPendulum-v5"
    events = list((root / "tb").glob("events.out.tfevents.*"))
    assert events and events[0].stat().st_size > 0


@pytest.mark.slow
def test_ppo_learns_inverted_pendulum(tmp_path: Path, learning_seed, record_property) -> None:
    """A random policy balances for ~5-10 steps; a working PPO gets >= 100 within 20k steps.

    Seeds 1-5 (torch 2.13.0): 824, 803, 915, 822, 898; the bar is 100."""
    cfg = _cfg(
        tmp_path,
        "learn",
        total_timesteps=20480,
        seed=learning_seed(1),
        ppo=PPOConfig(num_steps=1024, num_minibatches=32, update_epochs=10),
    )
    summary = run(cfg)
    assert summary.final_true_return is not None
    record_property("measured", summary.final_true_return)
    assert summary.final_true_return >= 100, summary


def _forward_velocity_after_training(
    reward_sign: float, steps: int = 24576, seed: int = 0
) -> float:
    """Train HalfCheetah on +-(x velocity) through the pluggable reward; mean x velocity at the end."""
    rng = np.random.default_rng(seed)
    torch.manual_seed(seed)
    envs = make_vec_env("HalfCheetah-v5", 1, seed)
    cfg = PPOConfig(num_steps=1024)
    learner = PPOLearner(17, 6, 1, cfg, torch.device("cpu"))
    collector = RolloutCollector(envs, "HalfCheetah-v5", learner.obs_norm, seed)
    iterations = steps // cfg.num_steps
    for i in range(iterations):
        learner.set_progress(i / iterations)
        rollout = collector.collect(learner.actor(), cfg.num_steps, rng)
        velocity = rollout.raw.obs[..., 8]  # HalfCheetah obs[8] = torso x velocity
        learner.learn(rollout, reward_sign * velocity, rng)
    envs.close()
    return float(velocity[rollout.raw.valid].mean())


@pytest.mark.slow
def test_reward_function_is_really_used(learning_seed, record_property) -> None:
    """The same PPO on 'go forward' and 'go backward' rewards moves the cheetah opposite ways.

    Mean x velocity at the end, seeds 1-5 (torch 2.13.0): forward 0.112, 0.067, 0.104, 0.068,
    0.148; backward -0.457, -0.228, -0.477, -0.157, -0.276. The gap is 0.225 to 0.581, the bar
    0.1; the signs held on every seed."""
    seed = learning_seed(0)
    forward = _forward_velocity_after_training(+1.0, seed=seed)
    backward = _forward_velocity_after_training(-1.0, seed=seed)
    record_property("measured", f"{forward:.3f} {backward:.3f}")
    assert forward > 0.0 > backward, (forward, backward)
    assert forward - backward > 0.1, (forward, backward)


def test_init_log_std_sets_the_starting_action_noise() -> None:
    """--init-log-std -1 starts from actions with std e^-1 (CleanRL: 0, std 1)."""
    rng = np.random.default_rng(0)
    for log_std in (0.0, -1.0):
        learner = PPOLearner(5, 4, 1, PPOConfig(init_log_std=log_std), torch.device("cpu"))
        obs = np.zeros((20_000, 5), np.float32)
        actions = learner.actor().sample(obs, rng)
        # the mean head starts near 0, so the spread of the actions is the policy's std
        assert np.allclose(actions.std(axis=0), np.exp(log_std), rtol=0.03), log_std


def _after_one_update(
    env_id: str, end_value: str, offset: float, absorbing: float, margin: float = 0.0
) -> PPOLearner:
    """PPO after one update on a 256-step rollout of ``env_id`` with a reward of ``offset + 1``
    plus the first observation a step, and the given absorbing reward and end margin."""
    rng = np.random.default_rng(0)
    torch.manual_seed(0)
    envs = make_vec_env(env_id, 1, 0)
    obs_dim, act_dim = envs.single_observation_space.shape[0], envs.single_action_space.shape[0]
    cfg = PPOConfig(
        num_steps=256, num_minibatches=4, update_epochs=1, end_value=end_value, end_margin=margin
    )
    learner = PPOLearner(obs_dim, act_dim, 1, cfg, torch.device("cpu"))
    rollout = RolloutCollector(envs, env_id, learner.obs_norm, 0).collect(
        learner.actor(), cfg.num_steps, rng
    )
    envs.close()
    rewards = (offset + 1.0 + rollout.raw.obs[..., 0]).astype(np.float32)  # not a constant
    learner.learn(rollout, rewards, rng, absorbing_reward=absorbing)
    return learner


def _same(a: PPOLearner, b: PPOLearner) -> bool:
    """Same parameters but for float rounding (0.3 + x + 0.7 is not always 1 + x)."""
    pairs = zip(a.agent.parameters(), b.agent.parameters(), strict=True)
    return max(float((x - y).abs().max().detach()) for x, y in pairs) < 1e-5


def test_end_value_zero_counts_rewards_from_the_absorbing_state() -> None:
    """--end-value zero: on Hopper (a random hopper falls within 256 steps), a learned reward of
    r_abs + r a step trains PPO exactly as a reward of r with an end worth 0 (an env's reward);
    with --end-value absorbing the offset stays. On HalfCheetah, whose episodes never end
    early, the absorbing reward was never labelled: the rewards stay as they are."""
    plain = _after_one_update("Hopper-v5", "absorbing", 0.0, 0.0)
    shifted = _after_one_update("Hopper-v5", "zero", -0.7, -0.7)
    as_is = _after_one_update("Hopper-v5", "absorbing", -0.7, -0.7)
    assert shifted.ends_seen and _same(plain, shifted) and not _same(plain, as_is)
    cheetah = _after_one_update("HalfCheetah-v5", "zero", -0.7, -0.7)
    assert not cheetah.ends_seen
    assert _same(cheetah, _after_one_update("HalfCheetah-v5", "absorbing", -0.7, -0.7))
    assert not _same(cheetah, _after_one_update("HalfCheetah-v5", "absorbing", 0.0, 0.0))
    # A resumed run goes on counting from the absorbing state.
    resumed = PPOLearner(11, 3, 1, shifted.cfg, torch.device("cpu"))
    resumed.load_state_dict(shifted.state_dict())
    assert resumed.ends_seen


def test_end_margin_counts_an_end_below_the_absorbing_reward() -> None:
    """--end-margin m: every step gains m over an end. With --end-value zero a reward of r_abs + r
    trains PPO as r + m with an end worth 0; with absorbing, an end worth r_abs - m forever is
    the same as lowering the absorbing reward by m. Without early ends, nothing changes."""
    plain = _after_one_update("Hopper-v5", "absorbing", 0.3, 0.0)
    assert _same(plain, _after_one_update("Hopper-v5", "zero", -0.7, -0.7, margin=0.3))
    assert not _same(plain, _after_one_update("Hopper-v5", "zero", -0.7, -0.7))
    lowered = _after_one_update("Hopper-v5", "absorbing", 0.0, 0.0)
    assert _same(lowered, _after_one_update("Hopper-v5", "absorbing", 0.0, 0.3, margin=0.3))
    cheetah = _after_one_update("HalfCheetah-v5", "zero", -0.7, -0.7)
    assert _same(cheetah, _after_one_update("HalfCheetah-v5", "zero", -0.7, -0.7, margin=0.3))


def _std_after_updates(min_std: float, sign: float, init_std: float = 0.2) -> float:
    """The policy's std after 3 PPO updates that pay ``sign`` times the size of each action's
    noise (sign -1: a reward that charges noise, as a learned reward can; +1: one that pays it)."""
    rng = np.random.default_rng(0)
    torch.manual_seed(0)
    cfg = PPOConfig(num_minibatches=4, update_epochs=4, min_std=min_std)
    agent = ActorCritic(3, 2, init_log_std=float(np.log(init_std)))
    optimizer = torch.optim.Adam(agent.parameters(), lr=0.05)
    for _ in range(3):
        obs = torch.randn(512, 3)
        with torch.no_grad():
            noise = torch.randn(512, 2) * agent.actor_logstd.exp()
            actions = agent.actor_mean(obs) + noise
            logprobs, _, values = agent.evaluate(obs, actions)
        advantages = sign * noise.abs().sum(-1)
        batch = PPOBatch(obs, actions, logprobs, advantages, values + advantages, values)
        stats = ppo_update(agent, optimizer, batch, cfg, rng)
    # what TensorBoard shows (losses/action_std_min) is the policy's smallest std
    assert stats.action_std_min == pytest.approx(float(agent.actor_logstd.detach().exp().min()))
    return stats.action_std_min


def test_min_std_floors_the_action_noise_and_lets_it_rise() -> None:
    """--min-std 0.2: a reward that charges noise drives the std below 0.2 without the floor
    and not with it; one that pays noise still raises it from the floor (a projection after
    each step, not a clamp that would leave the gradient at zero there)."""
    assert _std_after_updates(0.0, -1.0) < 0.15
    assert _std_after_updates(0.2, -1.0) == pytest.approx(0.2, rel=1e-5)
    assert _std_after_updates(0.2, +1.0) > 0.25
    # a floor above the starting noise lifts it to the floor from the first rollout
    learner = PPOLearner(5, 4, 1, PPOConfig(init_log_std=-3.0, min_std=0.2), torch.device("cpu"))
    assert np.allclose(learner.actor().std, 0.2)


def test_a_restart_draws_new_weights_and_anneals_the_rate_over_what_is_left() -> None:
    """--restart-at: new policy, value, optimiser state and reward scale; the observation
    statistics (shared with the collector) stay; the learning rate starts again at its full
    value and reaches 0 at the end of the run; a checkpoint keeps when it happened."""
    learner = _after_one_update("Hopper-v5", "zero", 0.0, 0.0)
    rate = learner.cfg.learning_rate
    norm, seen = learner.obs_norm, learner.obs_norm.rms.count
    probe = np.ones((1, 11), np.float32)
    before, scaled = learner.actor().mean(probe), learner.reward_scaler.rms.count
    assert learner.optimizer.state and scaled > 1 and seen > 1
    learner.set_progress(0.4)
    assert learner.optimizer.param_groups[0]["lr"] == pytest.approx(0.6 * rate)
    learner.restart(0.4)
    assert not np.allclose(before, learner.actor().mean(probe))
    assert not learner.optimizer.state and learner.reward_scaler.rms.count < 1
    assert learner.obs_norm is norm and norm.rms.count == seen
    for done, share in ((0.4, 1.0), (0.7, 0.5), (1.0, 0.0)):
        learner.set_progress(done)
        assert learner.optimizer.param_groups[0]["lr"] == pytest.approx(share * rate)
    resumed = PPOLearner(11, 3, 1, learner.cfg, torch.device("cpu"))
    resumed.load_state_dict(learner.state_dict())
    assert resumed.restarted_at == pytest.approx(0.4)
    resumed.set_progress(0.7)
    assert resumed.optimizer.param_groups[0]["lr"] == pytest.approx(0.5 * rate)
