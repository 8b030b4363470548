"""The house stays straight: layers import only downwards, no import circle, small parts.

Why a test: the structure decayed once already (4 import circles, a hand-kept copy of
what the metric specs declare, which produced a wrong number). Read from the source's
own imports and definitions (``ast``), nothing is run. The layer table is the one drawn
in ``docs/architecture.md``; a new top-level package must take a place in it.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import capaudit

PACKAGE = Path(capaudit.__file__).parent
SRC = PACKAGE.parent
MAX_MODULE_LINES = 300
MAX_FUNCTION_LINES = 80

# lowest first; a part may import its own layer's other parts only where listed below
LAYERS = [
    {"errors"},
    {"__init__", "core"},
    {"text"},
    {"store", "llm", "executors"},
    {"io"},
    {"metrics", "runner"},
    {"audit", "enrich", "train_downstream"},
    {"report", "leaderboard", "judge"},
    {"filters"},
    {"demo"},
    {"cli", "api", "api_audits"},
]
# imports between two parts of one layer that are allowed: (importer, imported)
SIDEWAYS: set[tuple[str, str]] = {("api", "api_audits")}   # the API's leaderboard and LIC
# the package's lazy __init__ opens the API on first use (capaudit.open): the one arrow up
ALLOWED_UP = {("__init__", "api")}


def modules() -> dict[str, Path]:
    out = {}
    for path in PACKAGE.rglob("*.py"):
        name = ".".join(path.relative_to(SRC).with_suffix("").parts)
        out[name.removesuffix(".__init__")] = path
    return out


def _owner(name: str, known: dict[str, Path]) -> str | None:
    while name and name not in known:
        name = name.rpartition(".")[0]
    return name or None


def import_graph() -> dict[str, set[str]]:
    """Module -> the capaudit modules it imports (at any depth of the file, lazy ones too)."""
    known = modules()
    graph: dict[str, set[str]] = defaultdict(set)
    for name, path in known.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            targets = []
            if isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = package.split(".")[:len(package.split(".")) - node.level + 1]
                    base = ".".join(parts + ([base] if base else []))
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base
                           for a in node.names]
            elif isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            for target in targets:
                owner = _owner(target, known) if target.startswith("capaudit") else None
                if owner and owner != name:
                    graph[name].add(owner)
    return graph


def part_of(module: str) -> str:
    parts = module.split(".")
    return "__init__" if len(parts) == 1 else parts[1]


def layer_of(part: str) -> int:
    for i, layer in enumerate(LAYERS):
        if part in layer:
            return i
    raise AssertionError(f"capaudit.{part} has no layer: add it to LAYERS and to "
                         "docs/architecture.md")


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import circle of ``graph`` as a list of modules, or None."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node)):
            return found
    return None


def test_cycle_finder_finds_a_circle_and_accepts_a_tree():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b", "c"}, "b": {"c"}, "c": set()}) is None


def test_no_import_circle_between_modules():
    cycle = find_cycle(import_graph())
    assert cycle is None, "import circle: " + " -> ".join(cycle)


def test_layers_import_only_downwards():
    wrong = []
    for module, targets in sorted(import_graph().items()):
        src = part_of(module)
        for target in sorted(targets):
            dst = part_of(target)
            if src == dst or (src, dst) in ALLOWED_UP:
                continue
            if layer_of(dst) > layer_of(src) or (layer_of(dst) == layer_of(src)
                                                 and (src, dst) not in SIDEWAYS):
                wrong.append(f"{module} -> {target}")
    assert not wrong, "imports against the layers (docs/architecture.md):\n" + "\n".join(wrong)


def test_modules_and_functions_stay_small():
    too_long = []
    for name, path in sorted(modules().items()):
        text = path.read_text(encoding="utf-8")
        if (n := len(text.splitlines())) > MAX_MODULE_LINES:
            too_long.append(f"{name}: {n} lines")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                if (n := node.end_lineno - node.lineno + 1) > MAX_FUNCTION_LINES:
                    too_long.append(f"{name}.{node.name}: {n} lines")
    assert not too_long, (f"over {MAX_MODULE_LINES} lines a module or {MAX_FUNCTION_LINES} a "
                          "function (split by meaning):\n" + "\n".join(too_long))
