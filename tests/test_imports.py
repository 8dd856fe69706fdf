"""The library's imports run one way: no import cycle between modules of dgdm_tf, and no
module uses another's private (underscore) names. Read from the source (AST), so imports
inside functions count too."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "dgdm_tf"


def module_imports(source: str, package: str = "dgdm_tf") -> tuple[set[str], list[str]]:
    """(modules of ``package`` this source imports, private names it takes from them)."""
    tree = ast.parse(source)
    mods, private, aliases = set(), [], {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            parts = node.module.split(".")
            if parts[0] != package:
                continue
            if len(parts) == 1:  # from dgdm_tf import a, b as c: modules
                for a in node.names:
                    mods.add(a.name)
                    aliases[a.asname or a.name] = a.name
            else:
                mods.add(parts[1])
                private += [f"{parts[1]}.{a.name}" for a in node.names if a.name.startswith("_")]
        elif isinstance(node, ast.Import):
            for a in node.names:
                parts = a.name.split(".")
                if parts[0] == package and len(parts) > 1:
                    mods.add(parts[1])
                    if a.asname:
                        aliases[a.asname] = parts[1]
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                and node.value.id in aliases and node.attr.startswith("_")
                and not node.attr.startswith("__")):
            private.append(f"{aliases[node.value.id]}.{node.attr}")
    return mods, sorted(set(private))


def import_graph(package_dir: Path = PACKAGE) -> tuple[dict[str, set[str]], dict[str, list[str]]]:
    graph, private = {}, {}
    for path in sorted(package_dir.glob("*.py")):
        name = path.stem
        mods, priv = module_imports(path.read_text())
        graph[name] = {m for m in mods if m != name}
        if priv:
            private[name] = priv
    return graph, private


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle as [a, b, ..., a], or None."""
    state = {}

    def visit(node, stack):
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state:
                found = visit(nxt, stack)
                if found:
                    return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state:
            found = visit(node, [])
            if found:
                return found
    return None


def test_the_checks_catch_a_cycle_and_a_private_import():
    src = ("from dgdm_tf import pretrain as P\nimport dgdm_tf.ops\n"
           "def f():\n    from dgdm_tf.plots import _save, plot\n    return P._tiles(1)\n")
    mods, private = module_imports(src)
    assert mods == {"pretrain", "ops", "plots"}
    assert private == ["plots._save", "pretrain._tiles"]
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_the_library_has_no_import_cycle():
    graph, _ = import_graph()
    assert len(graph) > 20
    assert find_cycle(graph) is None, f"import cycle: {' -> '.join(find_cycle(graph))}"


def test_no_module_uses_another_modules_private_names():
    _, private = import_graph()
    assert private == {}, f"private names used across modules: {private}"


def test_no_test_module_imports_another_test_module():
    """Shared test helpers live in tests/_*.py, not in another test module (importing a
    test module runs its collection side effects and ties two test files together)."""
    tests = Path(__file__).resolve().parent
    offenders = {}
    for path in sorted(tests.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = ([node.module] if isinstance(node, ast.ImportFrom) and node.module else
                     [a.name for a in node.names] if isinstance(node, ast.Import) else [])
            # the child scripts some tests write are strings, so only real imports count
            bad = [n for n in names if n.split(".")[0].startswith("test_")]
            if bad:
                offenders.setdefault(path.name, []).extend(bad)
    assert offenders == {}
