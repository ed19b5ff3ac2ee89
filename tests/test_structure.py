"""The package's shape: no import cycles, and one module where the agent meets the reward learner."""

from __future__ import annotations

import ast
from pathlib import Path

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


def test_only_the_loop_imports_both_the_agent_and_the_reward_learner() -> None:
    both = sorted(
        module
        for module, targets in _imports().items()
        if any(t.startswith("rlhf.agent") for t in targets)
        and any(t.startswith("rlhf.reward") for t in targets)
        and not module.startswith(("rlhf.agent", "rlhf.reward"))
    )
    assert both == ["rlhf.loop"]


def test_the_web_side_never_touches_a_model() -> None:
    """The server shares nothing with the trainer but the store (DESIGN.md)."""
    for module, targets in _imports().items():
        if module.startswith("rlhf.server"):
            assert not any(
                t.startswith(("rlhf.agent", "rlhf.reward", "rlhf.loop")) for t in targets
            )
