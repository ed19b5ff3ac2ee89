"""Grids of ``rlhf train`` runs on Ray (``rlhf sweep SPEC``), and Ray jobs for the benchmarks.

Ray is optional (the ``sweep`` extra: ``scripts/setup.sh sweep``): it is imported only when jobs start.
"""

from rlhf.sweep.command import Sweep
from rlhf.sweep.pool import Outcome, RayOptions, map_jobs, run_jobs

__all__ = ["Outcome", "RayOptions", "Sweep", "map_jobs", "run_jobs"]
