"""``rlhf sweep``: check the spec, run the unfinished cells on Ray, print and write the results."""

from __future__ import annotations

import functools
import re
import sys
from pathlib import Path
from typing import TextIO

from rlhf.config.ranges import at_least
from rlhf.core.shell import program, short_path
from rlhf.run.lifecycle import RunInterrupted
from rlhf.sweep.command import Sweep
from rlhf.sweep.grid import Cell, expand, preflight_cells
from rlhf.sweep.plot import plot_curves
from rlhf.sweep.pool import RayOptions, check_cluster, import_ray, map_jobs
from rlhf.sweep.progress import duration
from rlhf.sweep.results import (
    cell_table,
    format_table,
    group_table,
    write_cells_csv,
    write_groups_csv,
)
from rlhf.sweep.spec import Spec, SpecError, load_spec
from rlhf.sweep.worker import Action, CellResult, one_line, plan, read_result, run_cell, run_setup


def _check_options(command: Sweep) -> None:
    """The sweep's own numbers, in the one-line form of rlhf train's ranges (Ray would refuse
    a negative --max-retries with a traceback, after starting)."""

    def check(ok: bool, template: str, *_: object) -> None:
        if not ok:
            raise SpecError(re.sub(r"\{(\w+)\}", lambda m: "--" + m[1].replace("_", "-"), template))

    at_least(check, "num_cpus", command.num_cpus, 1, 1_000_000)
    at_least(check, "max_retries", command.max_retries, 0, 1000)


def prepare(command: Sweep) -> tuple[Spec, tuple[Cell, ...], Path]:
    """The spec, its cells and the sweep directory, every cell checked before anything runs.

    Raises:
        SpecError: one line naming the bad key, flag or cell.
    """
    if command.spec is None and not (command.grid or command.train or command.seeds):
        raise SpecError("no SPEC: give a TOML file or --grid/--train/--seeds (rlhf sweep --help)")
    _check_options(command)
    spec = load_spec(command)
    for item in spec.setup:  # here too: the spec's env ids must exist to be checked
        try:
            run_setup([item])
        except Exception as exc:
            raise SpecError(f"setup {item}: {one_line(exc)}") from None
    if command.sweep_dir is not None:
        root = Path(command.sweep_dir)
    elif command.spec is not None:
        root = Path("sweeps") / Path(command.spec).stem
    else:
        raise SpecError("--sweep-dir is required without a SPEC file")
    cells = expand(spec, root)
    preflight_cells(cells)
    return spec, cells, root


def run_sweep(command: Sweep, out: TextIO | None = None) -> list[CellResult]:
    """Run every unfinished cell of ``command``'s sweep; the results of all cells, in order.

    Raises:
        SpecError: a bad spec or flag (before Ray starts).
        RunInterrupted: Ctrl-C or SIGTERM; running cells wrote checkpoints, a rerun resumes.
    """
    out = out if out is not None else sys.stdout
    spec, cells, root = prepare(command)
    todo = [cell for cell in cells if plan(cell)[0] is not Action.SKIP]
    options = RayOptions(command.address, command.num_cpus, command.max_retries, command.dashboard)
    if todo:  # before any directory is made: the install hint, a cluster that does not answer
        import_ray()
        check_cluster(options)
    root.mkdir(parents=True, exist_ok=True)
    say = functools.partial(print, file=sys.stderr, flush=True)
    say(f"sweep {root}: {len(cells)} cells, {len(cells) - len(todo)} finished before")
    try:
        outcomes = map_jobs(
            functools.partial(run_cell, setup=spec.setup),
            todo,
            options,
            describe=_describe,
            ok=lambda result: result.ok,
            skipped=len(cells) - len(todo),
            title="sweep",
        )
    except KeyboardInterrupt:
        finished = sum(plan(cell)[0] is Action.SKIP for cell in cells)
        raise RunInterrupted(
            f"sweep stopped with {finished} of {len(cells)} cells finished; the same command"
            " continues it (unfinished cells resume from their checkpoints)",
            130,
        ) from None
    ran = {
        cell.name: o.value or read_result(cell, o.error)
        for cell, o in zip(todo, outcomes, strict=True)
    }
    results = [ran.get(cell.name) or read_result(cell, ran=False) for cell in cells]
    report(results, root, out)
    return results


def _describe(result: CellResult) -> str:
    if not result.ok:
        return f"{result.name}: {result.status}: {result.error or 'no error recorded'}"
    ret = "-" if result.final_true_return is None else f"{result.final_true_return:.1f}"
    sps = "-" if result.sps is None else f"{result.sps:.0f}"
    wall = "-" if result.wall_seconds is None else duration(result.wall_seconds)
    return f"{result.name}: return {ret}, {sps} steps/s, {wall}"


def report(results: list[CellResult], root: Path, out: TextIO) -> None:
    """Print both tables and write them (results.csv, groups.csv) and the curves (curves.png)."""
    write_cells_csv(root / "results.csv", results)
    write_groups_csv(root / "groups.csv", results)
    print(f"cells ({root / 'results.csv'}):", file=out)
    print(format_table(*cell_table(results)), file=out)
    print(
        f"\ngroups ({root / 'groups.csv'}): final true return over seeds,"
        " interquartile mean with a 95% bootstrap interval",
        file=out,
    )
    print(format_table(*group_table(results)), file=out)
    print(f"\n{plot_curves(results, root / 'curves.png')}", file=out)
    print(f"{program('tensorboard')} --logdir {short_path(root)}", file=out, flush=True)


def sweep_main(command: Sweep) -> None:
    """The command line's ``rlhf sweep``: exit 1 when a cell did not finish."""
    results = run_sweep(command)
    failed = [r for r in results if not r.ok]
    if failed:
        print(
            f"rlhf: {len(failed)} of {len(results)} cells did not finish (see the error column);"
            " running the same command again retries them",
            file=sys.stderr,
        )
        raise SystemExit(1)
