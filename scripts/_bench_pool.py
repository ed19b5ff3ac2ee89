"""Runs benchmark jobs in a pool of spawned processes (one core each), reporting as they finish."""

from __future__ import annotations

import multiprocessing as mp
from collections.abc import Callable, Sequence
from typing import Any


def run_jobs(job: Callable[[Any], Any], jobs: Sequence[Any], processes: int, label: str) -> list:
    """``job(j)`` for every j, ``processes`` at a time; prints one line per finished result.

    ``label`` names the result attribute printed first (e.g. "impl" or "mode").
    """
    results = []
    pool = mp.get_context("spawn").Pool(processes)
    try:
        for result in pool.imap_unordered(job, jobs):
            results.append(result)  # report as runs finish, so a long invocation shows progress
            name = getattr(result, label)
            print(f"done: {name} seed {result.seed}: {result.sps:.0f} steps/s", flush=True)
        # close + join, not the context manager's terminate(): killed workers leak semaphores
        # and the resource tracker's warnings would bury the figures' last line.
        pool.close()
    except BaseException:
        pool.terminate()
        raise
    finally:
        pool.join()
    return results
