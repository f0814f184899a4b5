"""The layers of docs/architecture.md hold: no import runs from a lower layer to a higher one, and no cycle exists,
even with every function-local import counted as if it were at the top of its module; no method folder imports
another; every backend class lives in ``rearank/backends/``; callers ask what a backend or a method declares instead
of comparing its name (at most :data:`MAX_NAME_COMPARISONS` places outside the name's own folder)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
#: The project's packages: ``rearank`` and every package beside it (the tests are no part of the house).
PACKAGES = sorted(p.parent.name for p in ROOT.glob("*/__init__.py") if p.parent.name != "tests")

#: rearank's layers, bottom first (see docs/architecture.md): each entry is one of its folders or one of its few
#: single-file root modules. A module may import from its own layer and the ones below. Every package outside
#: rearank (benchmark suites, data synthesis, recipes) sits on top, beside the commands.
LAYERS = (
    ("base", ("types", "errors", "cache", "plugins", "machine")),
    ("files and data", ("io", "data")),
    ("below the methods", ("measures", "qa", "prompts", "grammar")),
    ("backends", ("backends",)),
    ("methods", ("methods",)),
    ("engine", ("engine",)),
    ("run", ("run", "flags")),
    ("faces", ("api", "pyterrier", "server", "view", "rag", "support", "testing")),
    ("commands", ("cli", "__main__")),
)
TOP = len(LAYERS)
_LAYER_OF = {entry: number for number, (_, entries) in enumerate(LAYERS, 1) for entry in entries}


def modules() -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            name = ".".join(path.relative_to(ROOT).with_suffix("").parts)
            found[name.removesuffix(".__init__")] = path
    return found


def layer(module: str) -> int | None:
    """The layer of ``module``: its rearank entry's, the top for a package outside rearank, None if unlisted."""
    top, _, rest = module.partition(".")
    if top != "rearank":
        return TOP
    return _LAYER_OF.get(rest.partition(".")[0])


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


def test_the_table_names_each_folder_or_root_module_of_rearank_once_in_at_most_25_entries():
    entries = [entry for _, layer_entries in LAYERS for entry in layer_entries]
    assert len(entries) == len(set(entries)) <= 25
    assert [e for e in entries if not ((ROOT / "rearank" / e).is_dir() or (ROOT / "rearank" / f"{e}.py").is_file())] == []


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


def method_folder(module: str) -> str | None:
    """The method folder of ``module`` (``listwise`` for ``rearank.methods.listwise.answer``), None outside one."""
    parts = module.split(".")
    folder = ROOT.joinpath(*parts[:3])
    return parts[2] if parts[:2] == ["rearank", "methods"] and len(parts) > 2 and folder.is_dir() else None


def test_no_method_folder_imports_another():
    """What methods share lives beside them (``methods/base.py``, ``reasoning.py``, ``truth.py``) or below
    (``measures/``), so a method's folder can be read, moved or left out on its own."""
    known = modules()
    borrowed = [f"{path.relative_to(ROOT)}:{line} imports {target}"
                for name, path in known.items() if method_folder(name)
                for target, line in imports(path, known) if method_folder(target) not in (None, method_folder(name))]
    assert borrowed == []


def test_only_the_command_lines_import_the_cli():
    """The packages beside rearank sit on the commands' layer, but take what they share from below it (the flags
    of open retrieval live in ``rearank.rag.config``), not from ``rearank.cli``."""
    known = modules()
    inside = ("rearank.cli", "rearank.__main__")
    borrowed = [f"{path.relative_to(ROOT)}:{line} imports {target}" for name, path in known.items()
                if not name.startswith(inside)
                for target, line in imports(path, known) if target.startswith("rearank.cli")]
    assert borrowed == []


def test_the_bench_scripts_import_no_recipe():
    """``bench/`` (scripts, no package) measures rearank; what a script and a recipe check share lives in rearank."""
    known = modules()
    borrowed = [f"{path.relative_to(ROOT)}:{line} imports {target}" for path in sorted((ROOT / "bench").glob("*.py"))
                for target, line in imports(path, known) if target.partition(".")[0] in ("recipes", "benchmark")]
    assert borrowed == []


def _is_backend(node: ast.ClassDef) -> bool:
    """A backend class: a ``BackendBase`` subclass, or a class with ``generate(self, prompts, settings)``."""
    bases = {b.id if isinstance(b, ast.Name) else b.attr for b in node.bases if isinstance(b, ast.Name | ast.Attribute)}
    generate = [f for f in node.body if isinstance(f, ast.FunctionDef) and f.name == "generate"]
    return "BackendBase" in bases or any([a.arg for a in f.args.args] == ["self", "prompts", "settings"]
                                         for f in generate)


def test_every_backend_class_lives_in_rearank_backends():
    elsewhere = [f"{path.relative_to(ROOT)}:{node.lineno} {node.name}" for name, path in modules().items()
                 if not name.startswith("rearank.backends.")
                 for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
                 if isinstance(node, ast.ClassDef) and _is_backend(node)]
    assert elsewhere == []


#: Comparisons with a registered name allowed outside its own folder (issue #47: callers ask a capability instead).
MAX_NAME_COMPARISONS = 5


def _registered_names() -> dict[str, Path]:
    """Every builtin backend, ranking method and card name -> the folder it may be compared in."""
    from rearank.backends.registry import BACKENDS
    from rearank.methods import METHODS
    from rearank.methods.card import CARDS

    home = {name: ROOT / "rearank" / "backends" for name in BACKENDS.builtin_names}
    for name in METHODS.builtin_names:
        home.setdefault(name, ROOT.joinpath(*METHODS[name].__module__.split(".")[:3]))
    for name in CARDS.builtin_names:
        home.setdefault(name, Path(CARDS[name].folder))
    return home


def _literals(node: ast.AST) -> list[str]:
    """The string literals of ``node``: itself, or the items of a tuple, list or set literal."""
    items = node.elts if isinstance(node, ast.Tuple | ast.List | ast.Set) else [node]
    return [n.value for n in items if isinstance(n, ast.Constant) and isinstance(n.value, str)]


def name_lookups(tree: ast.AST) -> list[tuple[int, str]]:
    """``(line, name literal)`` of every ``==``/``!=``/``in``/``not in`` comparison, ``x["name"]`` and
    ``x.get("name")`` in ``tree`` (any string literal; the caller keeps the registered names)."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            for i, op in enumerate(node.ops):
                left, right = sides[i], sides[i + 1]
                if isinstance(op, ast.Eq | ast.NotEq):
                    found += [(node.lineno, s) for side in (left, right) if isinstance(side, ast.Constant)
                              for s in _literals(side)]
                elif isinstance(op, ast.In | ast.NotIn):
                    found += [(node.lineno, s) for s in _literals(left) + (
                        _literals(right) if isinstance(right, ast.Tuple | ast.List | ast.Set) else [])]
        elif isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant):
            found += [(node.lineno, s) for s in _literals(node.slice)]
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get" \
                and node.args:
            found += [(node.lineno, s) for s in _literals(node.args[0])]
    return sorted(set(found))


def test_the_scan_finds_each_comparison_and_lookup_but_no_default():
    code = ("if a == 'hf' or 'x' != b or c in ('oracle', 'y') or 'vllm' not in d or e in names:\n"
            "    d['scorer'] = d.get('openai', 'groupwise')\n"
            "def f(method: str = 'listwise'):\n"
            "    parser.add_argument('--backend', default='hf', choices=('hf', 'vllm'))\n")
    assert name_lookups(ast.parse(code)) == [(1, "hf"), (1, "oracle"), (1, "vllm"), (1, "x"), (1, "y"),
                                             (2, "openai"), (2, "scorer")]


def test_at_most_five_comparisons_with_a_backend_or_method_name_outside_its_folder():
    """Callers ask what a backend or a method declares (``NEEDS_QRELS``, ``ROLE``, ``LOCAL_MODEL``, a card's
    answer style, a method card's ``backend``) instead of comparing its name: a backend name is compared only
    in ``rearank/backends/``, a method's or card's only in its own folder."""
    home = _registered_names()
    paths = sorted((ROOT / "rearank").rglob("*.py")) + sorted((ROOT / "benchmark").rglob("*.py"))
    places: dict[str, list[str]] = {}
    for path in paths:
        for line, name in name_lookups(ast.parse(path.read_text(encoding="utf-8"))):
            if name in home and not path.is_relative_to(home[name]):
                places.setdefault(f"{path.relative_to(ROOT)}:{line}", []).append(name)
    found = [f"{place} {', '.join(names)}" for place, names in places.items()]
    assert len(found) <= MAX_NAME_COMPARISONS, f"{len(found)} places compare a registered name:\n" + "\n".join(found)
