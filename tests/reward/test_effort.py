"""--reward-model.effort-cost: actions enter the reward only as a learned cost it cannot turn
into pay."""

from __future__ import annotations

import numpy as np
import torch

from rlhf.config import RewardConfig
from rlhf.core.types import Pair, Preference, Segment
from rlhf.reward.bradley_terry import preference_accuracy
from rlhf.reward.learner import RewardLearner
from rlhf.reward.model import RewardEnsemble
from rlhf.reward.train import member_optimiser, train_ensemble
from tests.support.toy_reward import ToyTask


def _busy_segment(rng: np.random.Generator, toy: ToyTask) -> Segment:
    """A clip whose progress comes with effort, as on a robot (the busier clip moves more): the
    truth is progress minus 0.1 |a|^2, progress is 0.5 |a|^2 plus noise, and the observation
    shows the progress only through noise, so the actions tell the reward more of it (the torque
    now is the motion about to be seen)."""
    t = toy.length
    act = np.clip(
        rng.normal(size=(1, toy.act_dim)) + 0.5 * rng.normal(size=(t, toy.act_dim)), -1, 1
    )
    effort = (act**2).sum(-1)
    progress = 0.5 * effort + 0.1 * rng.normal(size=t)
    obs = 0.1 * rng.normal(size=(t, toy.obs_dim))
    obs[:, 8] = progress + 2 * rng.normal(size=t)
    truth = progress - 0.1 * effort
    empty = np.zeros((t, 0))
    return Segment(
        obs=obs.astype(np.float32),
        actions=act.astype(np.float32),
        true_rewards=truth.astype(np.float32),
        qpos=empty,
        qvel=empty,
        env_id="Toy-v0",
    )


def _busy_preferences(n: int, rng: np.random.Generator, toy: ToyTask) -> list[Preference]:
    prefs = []
    for _ in range(n):
        pair = Pair(_busy_segment(rng, toy), _busy_segment(rng, toy))
        prefs.append(Preference(pair, float(pair.left.true_return > pair.right.true_return)))
    return prefs


def _pay_for_effort(learner: RewardLearner, obs: np.ndarray, act: np.ndarray) -> np.ndarray:
    """Per row: what the reward pays for the row's action over no action at all."""
    return learner.score(obs, act) - learner.score(obs, np.zeros_like(act))


def test_a_reward_that_reads_actions_pays_for_effort_and_an_effort_cost_cannot(toy):
    rng = np.random.default_rng(0)
    prefs = _busy_preferences(400, rng, toy)
    obs = np.concatenate([_busy_segment(rng, toy).obs for _ in range(12)])
    act = np.clip(rng.normal(size=(len(obs), toy.act_dim)), -1, 1).astype(np.float32)
    paid = {}
    for effort in (False, True):
        cfg = RewardConfig(effort_cost=effort)
        learner = RewardLearner(toy.obs_dim, toy.act_dim, cfg, seed=0)
        train_ensemble(learner.ensemble, prefs, cfg, np.random.default_rng(1))
        paid[effort] = _pay_for_effort(learner, obs, act) / learner.score(obs, act).std()
    # The reward with actions as inputs learns that effort pays (the labels say so): measured
    # over seeds 0-3, it pays for the row's action on 78-98% of the rows, 0.15-0.29 standard
    # deviations of its reward a step on average.
    assert paid[False].mean() > 0.05
    assert (paid[False] > 0).mean() > 0.6
    # The effort cost never pays, on any row, whatever the labels said ...
    assert (paid[True] <= 0).all()
    # ... and whatever its weights: a cost of either sign per entry cannot pay either.
    with torch.no_grad():
        for member in learner.ensemble.members:
            member.effort_root.copy_(torch.linspace(-1, 1, toy.act_dim))
    assert (_pay_for_effort(learner, obs, act) <= 0).all()


def test_an_effort_cost_learns_the_control_cost_and_the_rest(toy, tmp_path):
    # The toy reward is obs[8] - 0.1 |a|^2: the network learns obs[8], the cost the rest. Over
    # seeds 0-4 (data and ensemble): r with the truth 0.93-0.97, what it charges against |a|^2
    # 0.95-0.99, held-out accuracy 0.92-0.95.
    rng = np.random.default_rng(0)
    train, held_out = toy.preferences(500, rng), toy.preferences(1000, rng)
    cfg = RewardConfig(effort_cost=True)
    learner = RewardLearner(toy.obs_dim, toy.act_dim, cfg, seed=0)
    train_ensemble(learner.ensemble, train, cfg, np.random.default_rng(1))
    obs, act = toy.steps(rng)
    scores = learner.score(obs, act)
    assert np.corrcoef(scores, toy.reward(obs, act))[0, 1] > 0.9
    # What the reward charges for an action follows its size: the cost part alone, exactly
    # quadratic, so it orders rows by effort (weights per entry differ a little).
    charged = -_pay_for_effort(learner, obs, act)
    assert (charged >= 0).all()
    assert np.corrcoef(charged, (act**2).sum(-1))[0, 1] > 0.9
    assert preference_accuracy(learner.ensemble, held_out) >= 0.85
    # A saved model keeps the cost (the file holds the config and the roots).
    torch.save(learner.state_dict(), tmp_path / "reward.pt")
    loaded = RewardLearner.from_state_dict(torch.load(tmp_path / "reward.pt", weights_only=True))
    np.testing.assert_array_equal(loaded.score(obs, act), scores)


def test_weight_decay_leaves_the_effort_cost_alone():
    # Decay on the roots would shrink the learned cost towards "effort is free" every step,
    # whatever the labels say: the roots sit in a group without it.
    cfg = RewardConfig(effort_cost=True, weight_decay=1.0)
    net = RewardEnsemble(5, 2, cfg, seed=0).members[0]
    opt = member_optimiser(*net.decayed_parameters(), cfg)
    before = net.effort_root.detach().clone()
    net.effort_root.grad = torch.zeros_like(net.effort_root)
    for p in net.body.parameters():
        p.grad = torch.zeros_like(p)
    weight = net.body[0].weight.detach().clone()
    opt.step()  # zero gradients: only the decay moves anything
    torch.testing.assert_close(net.effort_root.detach(), before, rtol=0, atol=0)
    assert (net.body[0].weight.detach().abs() < weight.abs()).any()
    # Without the option every parameter decays, as before.
    plain = RewardEnsemble(5, 2, RewardConfig(), seed=0).members[0]
    decayed, undecayed = plain.decayed_parameters()
    assert undecayed == [] and len(decayed) == len(list(plain.parameters()))
