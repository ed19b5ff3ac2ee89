"""PEBBLE's intrinsic reward: a particle estimate of state entropy from k-nearest-neighbour distances.

Before the first query, PEBBLE (Lee et al. 2021) trains SAC to maximise the entropy of the states
it visits, so the first segments shown to a teacher already differ in interesting ways. A state's
reward is its distance to its k-th nearest neighbour among the states in the replay buffer (far
from everything seen: new), divided by a running standard deviation of those distances so its
scale stays steady as the buffer spreads (B-Pref's ``compute_state_entropy``).
"""

from __future__ import annotations

import numpy as np
import torch

from rlhf.agent.replay import ReplayBuffer
from rlhf.agent.rollout import RunningMeanStd

REFERENCE_STATES = 10_000
"""Buffer states a minibatch is compared with; a random subset beyond that (the cost of a
minibatch grows with it, and B-Pref's 9,000 pretraining steps stay below it)."""


class StateEntropyReward:
    """``(obs, actions) -> reward``: the normalised k-NN distance of each observation.

    Args:
        buffer: the replay buffer whose stored observations are the reference set.
        k: which neighbour (1 = the nearest other state).
        rng: draws the reference subset when the buffer holds more than ``reference`` states.
        reference: the most reference states a call compares with.
    """

    def __init__(
        self,
        buffer: ReplayBuffer,
        k: int,
        rng: np.random.Generator,
        reference: int = REFERENCE_STATES,
    ) -> None:
        self.buffer = buffer
        self.k = k
        self.rng = rng
        self.reference = reference
        self.stats = RunningMeanStd(())

    def distances(self, obs: np.ndarray) -> np.ndarray:
        """Each row's distance to its k-th nearest stored state, (B,) float32."""
        size = len(self.buffer)
        if size <= self.reference:
            ref = self.buffer.obs[:size]
        else:
            ref = self.buffer.obs[self.rng.integers(0, size, self.reference)]
        dists = torch.cdist(torch.from_numpy(np.ascontiguousarray(obs)), torch.from_numpy(ref))
        # k + 1: a sampled state is usually in the reference set itself, at distance 0.
        kth = min(self.k + 1, ref.shape[0])
        # topk, not kthvalue: the same value, ~6x faster on CPU for 256 x 10,000 distances.
        return dists.topk(kth, dim=1, largest=False).values[:, -1].numpy()

    def __call__(self, obs: np.ndarray, actions: np.ndarray) -> np.ndarray:
        dist = self.distances(obs)
        self.stats.update(dist.astype(np.float64))
        return (dist / np.sqrt(self.stats.var + 1e-8)).astype(np.float32)
