"""A run: the loop stages, the PPO and SAC loops over them, waits, lifecycle, checkpoints.

The only room that imports both the agent and the reward learner."""
