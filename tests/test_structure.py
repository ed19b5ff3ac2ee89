"""The package's shape: each folder of ``rlhf/`` is a room with one purpose, and what it may import
is its rule (one test case per room); no import cycles between modules or rooms; only ``run/``
brings the agent and the reward learner together; the web side never touches a model."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "rlhf"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports() -> dict[str, set[str]]:
    """Module -> the rlhf modules it imports (anywhere in the file, lazy imports included)."""
    modules = {_module_name(p): p for p in PACKAGE.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        found: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                # ``from pkg import submodule`` imports the submodule, not what pkg re-exports.
                subs = [f"{node.module}.{a.name}" for a in node.names]
                targets = [s for s in subs if s in modules] or [node.module]
            elif isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            else:
                continue
            found |= {t for t in targets if t in modules and t != name}
        graph[name] = found
    return graph


def test_no_import_cycles() -> None:
    graph = _imports()
    done: set[str] = set()

    def visit(node: str, path: list[str]) -> None:
        if node in path:
            cycle = [*path[path.index(node) :], node]
            raise AssertionError("import cycle: " + " -> ".join(cycle))
        if node in done:
            return
        for target in sorted(graph[node]):
            visit(target, [*path, node])
        done.add(node)

    for module in sorted(graph):
        visit(module, [])


ROOMS: dict[str, tuple[str, set[str]]] = {
    "core": ("types, errors, status, small file and shell helpers", set()),
    "config": ("settings per section, presets", {"core"}),
    "envs": ("make_env, physics state, cameras, goal envs", {"core", "config"}),
    "agent": ("PPO and SAC, rollouts, replay buffer, HER", {"core", "config", "envs"}),
    "store": ("the SQLite label store", {"core", "config"}),
    "queries": ("segments, the pool, selection: the model is an argument", {"core"}),
    "data": ("labelled data outside a run", {"core", "config", "envs", "store"}),
    "reward": (
        "the reward ensemble: model, training, fitting, checking",
        {"core", "config", "data"},
    ),
    "render": ("segment -> frames -> video", {"core", "config", "envs", "store"}),
    "server": ("the labelling web app", {"core", "config", "data", "render", "store"}),
    "feedback": (
        "teachers and the human session",
        {"core", "config", "data", "render", "server", "store"},
    ),
    "run": (
        "the loop and a run's life",
        {"core", "config", "envs", "agent", "reward", "queries", "store", "data", "feedback"},
    ),
    "sweep": ("grids of runs on Ray", {"core", "config", "run"}),
    "commands": (
        "one module per subcommand's body",
        {"core", "config", "envs", "agent", "data", "render", "run", "commands"},
    ),
}
"""Room -> (its purpose, the rooms it may import besides itself)."""


def _room(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 2 or (len(parts) == 2 and parts[1] in ROOMS) else "top"


def test_the_package_itself_holds_only_the_command_line() -> None:
    flat = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert flat == ["__init__.py", "__main__.py", "cli.py"]
    rooms = sorted(p.name for p in PACKAGE.iterdir() if (p / "__init__.py").exists())
    assert rooms == sorted(ROOMS), "a new room needs its rule in ROOMS"


@pytest.mark.parametrize("room", sorted(ROOMS))
def test_each_room_imports_only_what_its_rule_allows(room: str) -> None:
    allowed = ROOMS[room][1] | {room}
    wrong = sorted(
        f"{module} -> {target}"
        for module, targets in _imports().items()
        if _room(module) == room
        for target in targets
        if _room(target) not in allowed
    )
    assert not wrong, f"{room}/ ({ROOMS[room][0]}) may import only {sorted(allowed)}: {wrong}"


def test_commands_are_imported_only_by_the_command_line() -> None:
    importers = sorted(
        module
        for module, targets in _imports().items()
        if any(_room(t) == "commands" for t in targets) and _room(module) != "commands"
    )
    assert importers == ["rlhf.cli"]


def _room_graph() -> dict[str, set[str]]:
    """Room -> the other rooms its modules import (``top``: cli.py and __main__.py)."""
    graph: dict[str, set[str]] = {}
    for module, targets in _imports().items():
        room = _room(module)
        graph.setdefault(room, set()).update(_room(t) for t in targets if _room(t) != room)
    return graph


def test_rooms_import_each_other_without_cycles() -> None:
    graph, done = _room_graph(), set()

    def visit(room: str, path: tuple[str, ...]) -> None:
        assert room not in path, "room cycle: " + " -> ".join((*path, room))
        if room not in done:
            for other in sorted(graph.get(room, ())):
                visit(other, (*path, room))
            done.add(room)

    for room in sorted(graph):
        visit(room, ())


def test_only_the_run_imports_both_the_agent_and_the_reward_learner() -> None:
    both = sorted(room for room, others in _room_graph().items() if {"agent", "reward"} <= others)
    assert both == ["run"]


def test_the_web_side_never_touches_a_model() -> None:
    """The server shares nothing with the trainer but the store (DESIGN.md)."""
    for module, targets in _imports().items():
        if module.startswith("rlhf.server"):
            assert not any(t.startswith(("rlhf.agent", "rlhf.reward", "rlhf.run")) for t in targets)
