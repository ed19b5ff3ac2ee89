"""The learned reward: an ensemble of MLPs r(obs, action) -> scalar per step.

Two normalisers, both stored in the state dict:

* **Input** (per member, inside :class:`RewardNet`): raw MuJoCo observations mix scales from
  ~0.01 to ~10, so each member standardises its input with statistics the trainer refits on the
  labelled segments every round. A refit rewrites the first layer so that the member computes
  exactly the same function as before (the warm start is not disturbed), only better conditioned.
* **Output** (per member, in :class:`RewardEnsemble`): Bradley-Terry only fixes a member's reward
  up to an additive constant, and its scale drifts from round to round. After each training round
  the trainer standardises every member to zero mean and unit std over the steps of all labelled
  segments (Christiano et al. 2017 normalise to zero mean and constant std). The labelled segments
  are a sample of everything the policy has done so far, and refitting on them keeps the scale
  comparable across rounds; :meth:`RewardEnsemble.fit_output_normaliser` accepts any other sample
  (e.g. the latest rollout) instead. :meth:`RewardEnsemble.predict` averages the standardised
  members; :meth:`RewardEnsemble.preference_probs` uses the raw members, because those are what
  the Bradley-Terry probabilities were trained on.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from torch import nn

from rlhf.config import RewardConfig
from rlhf.core.types import Pair

_CHUNK_ROWS = 1 << 16
"""Rows per forward pass when scoring large batches (bounds peak memory)."""
_MIN_OUT_STD = 1e-6
"""Floor for a member's output std (a constant member)."""
_EFFORT_ROOT_INIT = 0.1
"""Where each root of --reward-model.effort-cost starts: a cost of 0.01 a_j^2 per action entry,
small beside a standardised reward, so the labels decide how much effort costs."""
_MIN_IN_STD = 0.1
"""Floor for an input feature's std. A feature (nearly) constant in the labelled data may vary
later; a tiny std would blow it up then, while a floor only leaves small features less scaled."""


class RewardNet(nn.Module):
    """MLP on concat(raw obs, action, absorbing flag) -> reward, with a function-preserving
    input standardiser.

    With ``effort`` (the input columns of the action), the MLP does not read the action: it enters
    only as a learned cost sum_j c_j a_j^2 with c_j = root_j^2 >= 0, so the reward can learn what
    effort costs and never pay for it (--reward-model.effort-cost).
    """

    def __init__(
        self,
        in_dim: int,
        hidden_sizes: Sequence[int],
        dropout: float = 0.0,
        zero_output: bool = False,
        bounded: bool = False,
        effort: slice | None = None,
    ) -> None:
        super().__init__()
        self.bounded = bounded
        self.effort = effort
        layers: list[nn.Module] = []
        width = in_dim
        for hidden in hidden_sizes:
            # Leaky ReLU (alpha 0.01) as in Christiano et al.'s MuJoCo reward network.
            layers += [nn.Linear(width, hidden), nn.LeakyReLU(0.01)]
            if dropout > 0:
                layers.append(nn.Dropout(dropout))
            width = hidden
        out = nn.Linear(width, 1)
        if zero_output:
            # An untrained member says nothing: every pair a tie (loss ln 2), so a round that
            # stops early leaves a flat reward rather than a random function to chase. Zeroing
            # after the default init draws the same hidden layers either way.
            nn.init.zeros_(out.weight)
            nn.init.zeros_(out.bias)
        layers.append(out)
        self.body = nn.Sequential(*layers)
        self.register_buffer("in_mean", torch.zeros(in_dim))
        self.register_buffer("in_std", torch.ones(in_dim))
        if effort is not None:
            keep = torch.ones(in_dim)
            keep[effort] = 0.0
            self.register_buffer("in_keep", keep)
            width = len(range(in_dim)[effort])
            self.effort_root = nn.Parameter(torch.full((width,), _EFFORT_ROOT_INIT))

    def decayed_parameters(self) -> tuple[list[nn.Parameter], list[nn.Parameter]]:
        """(the weights weight decay pulls towards 0, the rest): the effort roots are left out,
        or the decay alone would teach the reward that effort is free."""
        roots = [self.effort_root] if self.effort is not None else []
        return [p for p in self.parameters() if all(p is not r for r in roots)], roots

    def untrained(self) -> bool:
        """Whether the output layer is still zero (the member's network predicts 0 everywhere;
        an effort cost, --reward-model.effort-cost, still charges its small starting cost)."""
        return not any(p.any() for p in self.body[-1].parameters())

    def input_group_norm(self) -> torch.Tensor:
        """Sum over input quantities of the norm of the first layer's weights on each (the
        group lasso of --reward-model.input-sparsity; on standardised inputs, so every
        quantity is penalised on the same scale)."""
        return torch.linalg.vector_norm(self.body[0].weight, dim=0).sum()

    def _standardised(self, x: torch.Tensor) -> torch.Tensor:
        """What the MLP reads: standardised inputs, the action's columns zeroed with ``effort``."""
        h = (x - self.in_mean) / self.in_std
        return h * self.in_keep if self.effort is not None else h

    def features(self, x: torch.Tensor) -> torch.Tensor:
        """(..., in_dim) -> (..., last hidden width): what the output layer reads."""
        return self.body[:-1](self._standardised(x))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """(..., in_dim) -> (...,) per-step rewards (the MLP's part in (-1, 1) when ``bounded``)."""
        out = self.body(self._standardised(x)).squeeze(-1)
        out = torch.tanh(out) if self.bounded else out
        if self.effort is None:
            return out
        return out - (x[..., self.effort].square() * self.effort_root.square()).sum(-1)

    @torch.no_grad()
    def refit_input(self, mean: torch.Tensor, std: torch.Tensor) -> None:
        """Standardise inputs with new statistics without changing the function computed.

        With x_old = (x - m_old) / s_old and x_new = (x - m_new) / s_new, the first layer
        W x_old + b equals W' x_new + b' for W' = W * (s_new / s_old) and
        b' = b + W ((m_new - m_old) / s_old).
        """
        first = self.body[0]
        std = std.clamp_min(_MIN_IN_STD).to(self.in_std)
        mean = mean.to(self.in_mean)
        first.bias += first.weight @ ((mean - self.in_mean) / self.in_std)
        first.weight *= (std / self.in_std)[None, :]
        self.in_mean.copy_(mean)
        self.in_std.copy_(std)


class RewardEnsemble(nn.Module):
    """``cfg.ensemble_size`` independent :class:`RewardNet` members plus output normalisers.

    Args:
        obs_dim: size of the raw observation.
        act_dim: size of the action.
        cfg: widths, dropout and ensemble size.
        device: torch device the members live on; numpy in, numpy out either way.
        seed: seeds the initial weights (global torch RNG state is left untouched) and the
            trainer's train/validation split, so one seed gives one ensemble.
        seen_obs: the leading observation entries the members see (the rest are zeroed, as
            ``observations_only`` zeroes actions); None: all of them.
    """

    def __init__(
        self,
        obs_dim: int,
        act_dim: int,
        cfg: RewardConfig,
        device: torch.device | str = "cpu",
        seed: int = 0,
        seen_obs: int | None = None,
    ) -> None:
        super().__init__()
        self.obs_dim, self.act_dim, self.cfg, self.seed = obs_dim, act_dim, cfg, seed
        self.seen_obs = None if seen_obs is None or seen_obs >= obs_dim else seen_obs
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            self.members = nn.ModuleList(
                RewardNet(
                    obs_dim + act_dim + 1,
                    cfg.hidden_sizes,
                    cfg.dropout,
                    zero_output=cfg.output_init == "zero",
                    bounded=cfg.output_bound == "tanh",
                    effort=slice(obs_dim, obs_dim + act_dim) if cfg.effort_cost else None,
                )
                for _ in range(cfg.ensemble_size)
            )
        self.register_buffer("out_mean", torch.zeros(cfg.ensemble_size))
        self.register_buffer("out_std", torch.ones(cfg.ensemble_size))
        self.to(device)
        self.eval()

    @property
    def device(self) -> torch.device:
        return self.out_mean.device

    @property
    def size(self) -> int:
        """Number of members."""
        return len(self.members)

    @property
    def in_dim(self) -> int:
        """Input width: observation, action, and the absorbing-state flag."""
        return self.obs_dim + self.act_dim + 1

    def inputs(
        self, obs: np.ndarray, actions: np.ndarray, absorbing: np.ndarray | None = None
    ) -> torch.Tensor:
        """Concatenate (..., obs_dim), (..., act_dim) and the absorbing flag (..., bool; all False
        when None) into a float32 tensor on the ensemble's device."""
        obs = np.asarray(obs, dtype=np.float32)
        actions = np.asarray(actions, dtype=np.float32)
        if obs.shape[-1] != self.obs_dim or actions.shape[-1] != self.act_dim:
            raise ValueError(
                f"expected (..., {self.obs_dim}) obs and (..., {self.act_dim}) actions, "
                f"got {obs.shape} and {actions.shape}"
            )
        actions = self.seen_actions(actions)
        flag = np.zeros((*obs.shape[:-1], 1), np.float32)
        if absorbing is not None:
            flag[..., 0] = absorbing
        x = self.hide_unseen(np.concatenate([obs, actions, flag], axis=-1))
        return torch.from_numpy(x).to(self.device)

    def hide_unseen(self, x: np.ndarray) -> np.ndarray:
        """``x`` (..., in_dim) with the observation entries from ``seen_obs`` on zeroed, in place
        (the input keeps its width, like ``seen_actions``; no copy of a relabelled buffer)."""
        if self.seen_obs is not None:
            x[..., self.seen_obs : self.obs_dim] = 0.0
        return x

    def what_it_reads(self) -> str | None:
        """One line for the user when the members read only part of an observation (None when
        they read all of it)."""
        if self.seen_obs is None:
            return None
        return (
            f"reads {self.seen_obs} of the {self.obs_dim} observation entries, the joint"
            " positions and velocities (all of them: --reward-model.sees observation)"
        )

    def seen_actions(self, actions: np.ndarray) -> np.ndarray:
        """The actions as the networks see them: zeros with ``observations_only`` (the input
        keeps its width, so saved models load either way; a zero column stays zero once
        standardised); as they are with ``effort_cost``, whose members read them as a cost only."""
        hidden = self.cfg.observations_only and not self.cfg.effort_cost
        return np.zeros_like(actions) if hidden else actions

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """(..., in_dim) -> (M, ...) raw member rewards (train or eval mode as set)."""
        return torch.stack([member(x) for member in self.members])

    @torch.inference_mode()
    def _score(self, x: torch.Tensor) -> torch.Tensor:
        """(B, D) -> (M, B) raw member rewards in eval mode, chunked over rows."""
        was_training = self.training
        self.eval()
        try:
            chunks = [self(x[i : i + _CHUNK_ROWS]) for i in range(0, x.shape[0], _CHUNK_ROWS)]
        finally:
            self.train(was_training)
        return torch.cat(chunks, dim=1) if chunks else x.new_zeros((self.size, 0))

    def member_rewards(self, obs: np.ndarray, actions: np.ndarray) -> np.ndarray:
        """Raw (un-normalised) reward of every member: (B, obs_dim), (B, act_dim) -> (M, B)."""
        return self._score(self.inputs(obs, actions)).cpu().numpy()

    def predict(
        self, obs: np.ndarray, actions: np.ndarray, absorbing: np.ndarray | None = None
    ) -> np.ndarray:
        """The learned reward PPO trains on: mean of the standardised members, (B,) float32."""
        normed = self._standardised(obs, actions, absorbing)
        return normed.mean(dim=0).cpu().numpy().astype(np.float32, copy=False)

    def predict_with_spread(
        self, obs: np.ndarray, actions: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`predict` and the members' disagreement on each step: the std of their
        standardised rewards, (B,) float32 each (zero for a lone member)."""
        normed = self._standardised(obs, actions, None)
        spread = normed.std(dim=0, correction=0)
        as_np = (normed.mean(dim=0), spread)
        return tuple(v.cpu().numpy().astype(np.float32, copy=False) for v in as_np)  # type: ignore[return-value]

    def _standardised(
        self, obs: np.ndarray, actions: np.ndarray, absorbing: np.ndarray | None
    ) -> torch.Tensor:
        """Each member's reward on its own zero-mean, unit-std scale: (M, B)."""
        raw = self._score(self.inputs(obs, actions, absorbing))
        return (raw - self.out_mean[:, None]) / self.out_std[:, None]

    def absorbing_reward(self) -> float:
        """The learned reward of one step in the absorbing state (after an episode's end)."""
        obs = np.zeros((1, self.obs_dim), np.float32)
        actions = np.zeros((1, self.act_dim), np.float32)
        return float(self.predict(obs, actions, np.ones(1, bool))[0])

    def fit_output_normaliser(
        self, obs: np.ndarray, actions: np.ndarray, absorbing: np.ndarray | None = None
    ) -> None:
        """Set each member's output mean/std from its raw rewards on a sample of steps."""
        raw = self._score(self.inputs(obs, actions, absorbing))
        if raw.shape[1] == 0:
            return
        self.out_mean.copy_(raw.mean(dim=1))
        self.out_std.copy_(raw.std(dim=1, correction=0).clamp_min(_MIN_OUT_STD))

    def fit_input_normaliser(
        self, obs: np.ndarray, actions: np.ndarray, absorbing: np.ndarray | None = None
    ) -> None:
        """Re-standardise every member's inputs on a sample of steps (function unchanged)."""
        x = self.inputs(obs, actions, absorbing).reshape(-1, self.in_dim)
        if x.shape[0] < 2:
            return
        mean, std = x.mean(dim=0), x.std(dim=0, correction=0)
        for member in self.members:
            member.refit_input(mean, std)

    def preference_probs(self, pairs: list[Pair]) -> np.ndarray:
        """Each member's P(left preferred) = sigmoid(sum r(left) - sum r(right)): (M, P)."""
        if not pairs:
            return np.zeros((self.size, 0), dtype=np.float32)
        x, mask = stack_pairs(self, pairs)
        flat = self._score(x.reshape(-1, x.shape[-1])).reshape(self.size, *x.shape[:-1])
        returns = (flat * mask).sum(dim=-1)  # (M, P, 2)
        return torch.sigmoid(returns[..., 0] - returns[..., 1]).cpu().numpy()


def stack_pairs(ensemble: RewardEnsemble, pairs: list[Pair]) -> tuple[torch.Tensor, torch.Tensor]:
    """Stack pairs into inputs (P, 2, T, D) and a step mask (P, 2, T) on the ensemble's device.

    Absorbing steps carry the absorbing flag and count like any step (the teacher judged them).
    Pairs of different lengths are zero-padded to the longest; the mask (1 on real or absorbing
    steps, 0 on that padding) keeps the padding out of the summed returns.
    """
    longest = max(len(p.left) for p in pairs)
    for pair in pairs:
        if (
            pair.left.obs.shape[1] != ensemble.obs_dim
            or pair.left.actions.shape[1] != ensemble.act_dim
        ):
            raise ValueError(
                f"segments have obs/action sizes {pair.left.obs.shape[1]}/"
                f"{pair.left.actions.shape[1]}, the ensemble expects {ensemble.obs_dim}/{ensemble.act_dim}"
            )
    obs_dim, act_dim = ensemble.obs_dim, ensemble.act_dim
    x = np.zeros((len(pairs), 2, longest, ensemble.in_dim), dtype=np.float32)
    mask = np.zeros((len(pairs), 2, longest), dtype=np.float32)
    for i, pair in enumerate(pairs):
        for j, seg in enumerate((pair.left, pair.right)):
            steps = len(seg)
            x[i, j, :steps, :obs_dim] = seg.obs
            x[i, j, :steps, obs_dim : obs_dim + act_dim] = ensemble.seen_actions(seg.actions)
            x[i, j, seg.real_steps : steps, -1] = 1.0
            mask[i, j, :steps] = 1.0
    ensemble.hide_unseen(x)
    device = ensemble.device
    return torch.from_numpy(x).to(device), torch.from_numpy(mask).to(device)
