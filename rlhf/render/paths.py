"""Where rendered files go inside a run's ``videos/`` (shared by the workers and the server,
which must not import the renderers)."""

POLICY_DIR = "policy"
"""Subfolder of the run's ``videos/`` holding the policy clips (``<id>.mp4``, ``<id>.gif``)."""
