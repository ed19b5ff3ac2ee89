"""Jobs as Ray tasks with one CPU each, on a local Ray started on demand or on a cluster.

Ray does the placement, reruns a job whose worker died (``max_retries``) and serves the
dashboard; this module only submits, collects and shows progress. Used by ``rlhf sweep`` and by
the benchmark scripts. Ctrl-C (or SIGTERM) cancels the jobs: queued ones are dropped and running
ones get a SIGINT, which an ``rlhf`` run answers by writing a checkpoint and stopping.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from types import FrameType
from typing import Any, Generic, TypeVar

from rlhf.config import ConfigError
from rlhf.core.shell import missing_extra
from rlhf.sweep.cluster import Cluster, find_cluster, token_mode
from rlhf.sweep.progress import ProgressView
from rlhf.sweep.worker import one_line

J = TypeVar("J")
R = TypeVar("R")

STOP_GRACE = 120.0
"""Seconds a stopped sweep waits for running jobs to finish their iteration and checkpoint."""


@dataclass(frozen=True)
class RayOptions:
    """Where jobs run (see :class:`rlhf.sweep.command.Sweep` for each setting's meaning)."""

    address: str | None = None
    num_cpus: int | None = None
    max_retries: int = 3
    dashboard: bool = True


@dataclass(frozen=True)
class Outcome(Generic[R]):
    """A job's return value, or the one-line error that took its place."""

    value: R | None
    error: str | None = None


def import_ray() -> Any:
    try:
        import ray
    except ImportError:
        raise ConfigError(missing_extra("rlhf sweep needs Ray", "sweep")) from None
    return ray


@contextlib.contextmanager
def ray_session(options: RayOptions, say: Callable[[str], None]) -> Iterator[int]:
    """Ray for the jobs (started here unless this process already has it); yields its CPUs."""
    ray = import_ray()
    started = not ray.is_initialized()
    with contextlib.ExitStack() as stack:
        if started:
            _init(ray, options, say, stack)
        try:
            yield max(1, int(ray.cluster_resources().get("CPU", 1)))
        finally:
            if started:
                ray.shutdown()


def check_cluster(options: RayOptions) -> Cluster | None:
    """The cluster the options name (``--address`` or ``$RAY_ADDRESS``), checked to answer and
    to take this user's token (see :mod:`rlhf.sweep.cluster`); None: a local Ray.

    Raises:
        ConfigError: one line naming the cause and the fix.
    """
    address = options.address or os.environ.get("RAY_ADDRESS") or None
    if address is None:
        return None
    if options.num_cpus is not None:
        raise ConfigError("--num-cpus sizes a local Ray; a cluster (--address) has its own")
    return find_cluster(address, _named(options))


def _named(options: RayOptions) -> str:
    """How the cluster's address reads in messages: the flag, or the variable, that gave it."""
    if options.address:
        return f"--address {options.address}"
    return f"RAY_ADDRESS={os.environ.get('RAY_ADDRESS')}"


def _init(
    ray: Any, options: RayOptions, say: Callable[[str], None], stack: contextlib.ExitStack
) -> None:
    """``ray.init``: a local Ray, or the cluster at the address (checked first, see
    :mod:`rlhf.sweep.cluster`: a token the cluster wants is sent, any failure is one line)."""
    # Ray's INFO lines and the workers' output would bury the progress view; both stay in
    # Ray's session logs (/tmp/ray/session_latest/logs) and the dashboard.
    quiet: dict[str, Any] = {"logging_level": logging.ERROR, "log_to_driver": False}
    start = time.monotonic()
    cluster = check_cluster(options)
    if cluster is not None:
        stack.enter_context(token_mode(cluster))
        try:
            context = ray.init(address=cluster.address, **quiet)
        except (ConnectionError, RuntimeError, ValueError, ray.exceptions.RayError) as exc:
            raise ConfigError(f"{_named(options)}: cannot connect ({one_line(exc)})") from None
        token = "" if cluster.token_from is None else f", token from {cluster.token_from}"
        where = f"cluster at {cluster.target}{token}"
    else:
        cpus = options.num_cpus if options.num_cpus is not None else os.cpu_count() or 1
        if cpus < 1:
            raise ConfigError("--num-cpus must be >= 1")
        context = ray.init(num_cpus=cpus, include_dashboard=options.dashboard, **quiet)
        where = "local Ray"
    cpus = int(ray.cluster_resources().get("CPU", 0))
    board = f", dashboard http://{context.dashboard_url}" if context.dashboard_url else ""
    say(f"{where}: {cpus} CPUs, ready in {time.monotonic() - start:.1f}s{board}")


def _call(fn: Callable[[Any], Any], job: Any) -> Any:
    return fn(job)


def map_jobs(
    fn: Callable[[J], R],
    jobs: Sequence[J],
    options: RayOptions | None = None,
    describe: Callable[[R], str] = str,
    ok: Callable[[R], bool] = lambda value: True,
    skipped: int = 0,
    title: str = "jobs",
) -> list[Outcome[R]]:
    """``fn(job)`` for every job as a Ray task with one CPU; outcomes in the order of ``jobs``.

    ``fn`` and the jobs must pickle (Ray sends them to the workers). ``describe`` is the line
    printed when a job ends, ``ok`` tells the view whether that job counts as failed, and
    ``skipped`` adds jobs done before (shown as done). Ray is shut down before this returns, so
    nothing it prints comes after the caller's output.

    Raises:
        KeyboardInterrupt: Ctrl-C or SIGTERM, after the running jobs were asked to stop.
    """
    options = options or RayOptions()
    outcomes: list[Outcome[R]] = [Outcome(None, "not run")] * len(jobs)
    view = ProgressView(len(jobs) + skipped, skipped, title=title)
    if not jobs:
        view.close()
        return outcomes
    try:
        with ray_session(options, view.message) as cpus, _sigterm_interrupts():
            ray = import_ray()
            task = ray.remote(_call).options(num_cpus=1, max_retries=options.max_retries)
            pending = {task.remote(fn, job): i for i, job in enumerate(jobs)}
            try:
                while pending:
                    # Ray queues what the CPUs cannot take yet: the first `cpus` are running.
                    view.update(running=min(len(pending), cpus))
                    ready, _ = ray.wait(list(pending), num_returns=1, timeout=1.0)
                    for ref in ready:
                        i = pending.pop(ref)
                        outcomes[i] = _outcome(ray, ref, options.max_retries)
                        value, error = outcomes[i].value, outcomes[i].error
                        good = error is None and ok(value)  # type: ignore[arg-type]
                        view.finished(describe(value) if error is None else error, good)  # type: ignore[arg-type]
            except KeyboardInterrupt:
                _stop(ray, pending, view)
                raise
    finally:
        view.close()
    return outcomes


def _outcome(ray: Any, ref: Any, retries: int) -> Outcome[Any]:
    try:
        return Outcome(ray.get(ref))
    except ray.exceptions.RayTaskError as exc:  # the job raised: its own exception
        return Outcome(None, one_line(exc.cause if exc.cause is not None else exc))
    except ray.exceptions.RayError as exc:  # its worker died on every try
        tries = "once" if retries == 0 else f"on each of {retries + 1} tries"
        return Outcome(None, f"its worker died {tries} ({type(exc).__name__})")


def _stop(ray: Any, pending: dict[Any, int], view: ProgressView) -> None:
    """Cancel every job; wait (a second Ctrl-C: not) for running ones to write checkpoints."""
    view.message(
        "stopping: running jobs finish their iteration and write a checkpoint"
        " (Ctrl-C again to stop at once)"
    )
    for ref in pending:
        with contextlib.suppress(Exception):
            ray.cancel(ref)  # queued: dropped; running: a SIGINT in the worker
    with contextlib.suppress(KeyboardInterrupt):
        ray.wait(list(pending), num_returns=len(pending), timeout=STOP_GRACE)


@contextlib.contextmanager
def _sigterm_interrupts() -> Iterator[None]:
    """SIGTERM stops the jobs as Ctrl-C does (a plain kill would orphan Ray's agents)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def run_jobs(
    fn: Callable[[J], R],
    jobs: Sequence[J],
    num_cpus: int | None = None,
    describe: Callable[[R], str] = str,
    after_stop: str = "",
) -> list[R]:
    """:func:`map_jobs` for scripts: the values in the order of ``jobs``, on a local Ray with
    ``num_cpus`` CPUs (or ``$RAY_ADDRESS``'s cluster).

    A stop (Ctrl-C or SIGTERM) ends the script with exit status 130 and one line on stderr,
    ``after_stop`` saying what the script kept and how to go on, instead of a traceback; a job
    that raised ends it (after every other job ended) with exit status 1 and one line naming how
    many failed and the first error, then ``after_stop``.
    """
    cpus = None if os.environ.get("RAY_ADDRESS") else num_cpus
    try:
        outcomes = map_jobs(fn, jobs, RayOptions(num_cpus=cpus, dashboard=False), describe)
    except KeyboardInterrupt:
        print(f"stopped{'; ' + after_stop if after_stop else ''}", file=sys.stderr, flush=True)
        raise SystemExit(130) from None
    errors = [o.error for o in outcomes if o.error is not None]
    if errors:
        kept = f"; {after_stop}" if after_stop else ""
        say = f"{len(errors)} of {len(jobs)} jobs failed; the first: {errors[0]}{kept}"
        print(say, file=sys.stderr, flush=True)
        raise SystemExit(1)
    return [o.value for o in outcomes]  # type: ignore[misc]
