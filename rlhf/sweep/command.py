"""The ``rlhf sweep`` command line: what tyro parses (no Ray here, so ``--help`` stays fast)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

import tyro


@dataclass(frozen=True)
class Sweep:
    """rlhf sweep: run a grid of rlhf train runs on Ray; the same command again continues it."""

    spec: Annotated[str | None, tyro.conf.Positional, tyro.conf.arg(metavar="SPEC")] = None
    """The grid as a TOML file: seeds = [1, 2], setup = [...], [train] fixed flags, [grid] lists
    of values. Flags below add to it (and win over the same keys)."""
    train: Annotated[
        tuple[str, ...], tyro.conf.UseAppendAction, tyro.conf.arg(metavar="KEY=VALUE")
    ] = ()
    """A setting of every cell, e.g. --train env-id=Hopper-v5 (one flag per setting)."""
    grid: Annotated[
        tuple[str, ...], tyro.conf.UseAppendAction, tyro.conf.arg(metavar="KEY=V1,V2")
    ] = ()
    """A setting to vary (the cells are every combination), e.g. --grid query.total-labels=200,700."""
    seeds: Annotated[tuple[int, ...] | None, tyro.conf.arg(metavar="INT")] = None
    """Seeds of every combination (None: the spec's seeds, else rlhf train's --seed)."""
    setup: Annotated[tuple[str, ...], tyro.conf.arg(metavar="MODULE[:FUNCTION]")] = ()
    """Imported (and FUNCTION called) in every worker before its cell runs, and here before
    checking the spec: how a custom env gets registered, e.g. --setup my_envs:register."""
    sweep_dir: Annotated[str | None, tyro.conf.arg(metavar="DIR")] = None
    """Directory of the cells' run directories and the results (None: sweeps/<SPEC's name>)."""
    address: Annotated[str | None, tyro.conf.arg(metavar="ADDRESS")] = None
    """An existing Ray cluster (HOST:6379 from `ray start --head`, or auto); None: a local Ray
    started for this sweep (or $RAY_ADDRESS's cluster when set). A cluster with token
    authentication (Ray 2.60's `ray start --head` turns it on when its user has a token) gets the
    token Ray would use: $RAY_AUTH_TOKEN, else the file $RAY_AUTH_TOKEN_PATH, else
    ~/.ray/auth_token (`ray get-auth-token` on the head prints it); no RAY_AUTH_MODE needed. A
    cluster that does not answer, or refuses the token, is one line at once."""
    num_cpus: Annotated[int | None, tyro.conf.arg(metavar="INT")] = None
    """CPUs of the local Ray, i.e. cells at a time (None: every core of this machine)."""
    max_retries: int = 3
    """Times Ray reruns a cell whose worker died (killed, out of memory, node lost); the rerun
    resumes from the cell's last checkpoint."""
    dashboard: bool = True
    """Start Ray's dashboard with a local Ray (its address is printed)."""
