"""Fixed-horizon episodes: the env's own termination becomes information instead of an ending.

A learned reward cannot see when an episode ends, so an env that terminates leaks the sign of
the reward into the policy: with a reward that is mostly negative, falling over ends the
punishment early and the agent learns to fall; mostly positive, and it learns to live forever
whatever it does (imitation's docs: "Variable Horizon Environments Considered Harmful").
Christiano et al. 2017 removed variable-length episodes for this reason, and seals makes Ant,
Hopper, Humanoid and Walker2d fixed-horizon. :class:`FixedHorizon` does the same for any env:
episodes run to the time limit, and the step where the env would have ended its episode is
reported in ``info[ENDED]``. The env's own reward carries on (gymnasium's v5 robots pay their
healthy bonus only while healthy, and the pendulums pay nothing once the pole is down), so a
teacher still sees that falling is bad, and the loop can still report the standard return.
"""

from __future__ import annotations

from typing import Any, SupportsFloat

import gymnasium as gym

ENDED = "env_terminated"
"""Info key set to True on every step at which the env itself says the episode is over."""


class FixedHorizon(gym.Wrapper, gym.utils.RecordConstructorArgs):
    """Never terminate; report the env's termination in ``info[ENDED]`` instead.

    It records its (no) constructor arguments, as gymnasium's wrappers do, so ``env.spec`` can
    rebuild the wrapped stack (``gym.make(env.spec)``, ``check_env``).
    """

    def __init__(self, env: gym.Env) -> None:
        gym.utils.RecordConstructorArgs.__init__(self)
        gym.Wrapper.__init__(self, env)

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        obs, reward, terminated, truncated, info = self.env.step(action)
        if terminated:
            info = {**info, ENDED: True}
        return obs, reward, False, truncated, info
