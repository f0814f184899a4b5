"""The layers of docs/architecture.md hold: no import runs from a lower layer to a higher one, and no cycle exists,
even with every function-local import counted as if it were at the top of its module."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("rearank", "eval", "data_synthesis", "recipes")

#: Module prefix -> layer (longest prefix wins); see docs/architecture.md.
LAYERS = {
    "rearank.types": 1, "rearank.errors": 1, "rearank.cache": 1, "rearank.plugins": 1,
    "rearank.io": 2, "rearank.data": 2,
    "rearank.prompts": 3, "rearank.grammar": 3, "rearank.methods.listwise.answer": 3,
    "rearank.methods.listwise.window": 3, "rearank.methods.listwise.reward": 3, "rearank.methods.groupwise.parser": 3,
    "rearank.methods.groupwise.reward": 3, "rearank.methods.groupwise.oracle": 3, "rearank.methods.groupwise.labels": 3,
    "rearank.methods.groupwise.presets": 3, "rearank.methods.groupwise.prompt": 3, "rearank.methods.groupwise.rbo": 3,
    "rearank.measures": 3, "rearank.qa": 3, "rearank.rag.barrag.filtering": 3,
    "rearank.methods.barrag.parser": 3, "rearank.methods.arena.parser": 3, "rearank.methods.barrag.prompt": 3,
    "rearank.methods.arena.prompt": 3, "rearank.methods.arena.reward": 3, "rearank.methods.barrag.reward": 4,
    "rearank.methods.templates": 3, "rearank.methods.card": 3,
    "rearank.backends": 4, "rearank.models": 4, "rearank.methods": 4,
    "rearank.engine": 5,
    "rearank.run": 6, "rearank.flags": 6,
    "rearank.api": 7, "rearank.server": 7, "rearank.backends.chat_server": 7,
    "rearank.pyterrier": 7, "rearank.view": 7, "rearank.rag": 7, "rearank.testing": 7,
    "rearank.support": 7,
    "rearank.cli": 8, "rearank.demo": 8, "rearank.__main__": 8, "eval": 8, "data_synthesis": 8, "recipes": 8,
}


def modules() -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            name = ".".join(path.relative_to(ROOT).with_suffix("").parts)
            found[name.removesuffix(".__init__")] = path
    return found


def layer(module: str) -> int | None:
    best = max((p for p in LAYERS if module == p or module.startswith(p + ".")), key=len, default=None)
    return LAYERS[best] if best else None


def imports(path: Path, known: dict[str, Path]) -> list[tuple[str, int]]:
    """Project modules imported anywhere in ``path`` (function bodies too), with their line; the package
    ``rearank`` itself counts only for the names it defines (``from rearank import api`` imports ``rearank.api``)."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                sub = f"{node.module}.{alias.name}"
                out.append((sub if sub in known else node.module, node.lineno))
        elif isinstance(node, ast.Import):
            out.extend((alias.name, node.lineno) for alias in node.names)
    return [(m, line) for m, line in out if m in known and m != "rearank"]


def test_every_project_module_has_a_layer():
    assert [m for m in modules() if m != "rearank" and layer(m) is None] == []


def test_no_import_runs_from_a_lower_layer_to_a_higher_one():
    known = modules()
    upward = [f"{path.relative_to(ROOT)}:{line} ({layer(name)}) imports {target} ({layer(target)})"
              for name, path in known.items() if name != "rearank"
              for target, line in imports(path, known) if layer(target) > layer(name)]
    assert upward == []


def test_the_import_graph_has_no_cycle():
    known = modules()
    graph = {name: {t for t, _ in imports(path, known)} for name, path in known.items()}
    state: dict[str, int] = {}  # 1 on the stack, 2 done
    cycles = []

    def visit(node: str, stack: list[str]) -> None:
        state[node] = 1
        for nxt in graph.get(node, ()):
            if state.get(nxt) == 1:
                cycles.append(stack[stack.index(nxt):] + [nxt])
            elif nxt not in state:
                visit(nxt, [*stack, nxt])
        state[node] = 2

    for name in sorted(graph):
        if name not in state:
            visit(name, [name])
    assert cycles == []
