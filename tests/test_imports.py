"""The library's imports run one way: no import cycle between modules of dgdm_tf, and no
module (nor probe in experiments/) uses another's private (underscore) names. Read from
the source (AST), so imports inside functions count too."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "dgdm_tf"
EXPERIMENTS = PACKAGE.parents[1] / "experiments"


def _module_of(dotted: str, name: str | None, package_dir: Path) -> str:
    """The library module an import reaches: ``dotted`` (after ``dgdm_tf.``), or
    ``dotted.name`` when that is a module of its own (``from dgdm_tf.data import files``)."""
    if name is not None:
        sub = (dotted + "." + name) if dotted else name
        if (package_dir / (sub.replace(".", "/") + ".py")).is_file() or \
                (package_dir / sub.replace(".", "/") / "__init__.py").is_file():
            return sub
    return dotted


def module_imports(source: str, package: str = "dgdm_tf",
                   package_dir: Path = PACKAGE) -> tuple[set[str], list[str]]:
    """(modules of ``package`` this source imports, as dotted paths below it, and the
    private names it takes from them)."""
    tree = ast.parse(source)
    mods, private, aliases = set(), [], {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            parts = node.module.split(".")
            if parts[0] != package:
                continue
            dotted = ".".join(parts[1:])
            for a in node.names:
                mod = _module_of(dotted, a.name, package_dir)
                mods.add(mod)
                if mod != dotted:  # a module: its attributes are looked up later
                    aliases[a.asname or a.name] = mod
                elif a.name.startswith("_"):
                    private.append(f"{dotted}.{a.name}")
        elif isinstance(node, ast.Import):
            for a in node.names:
                parts = a.name.split(".")
                if parts[0] == package and len(parts) > 1:
                    mods.add(".".join(parts[1:]))
                    if a.asname:
                        aliases[a.asname] = ".".join(parts[1:])
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                and node.value.id in aliases and node.attr.startswith("_")
                and not node.attr.startswith("__")):
            private.append(f"{aliases[node.value.id]}.{node.attr}")
    mods.discard("")
    return mods, sorted(set(private))


def import_graph(package_dir: Path = PACKAGE) -> tuple[dict[str, set[str]], dict[str, list[str]]]:
    """Every module of the package (dotted, below it; a package is its ``__init__``) with
    the modules it imports, and the private names each takes from another."""
    graph, private = {}, {}
    for path in sorted(package_dir.rglob("*.py")):
        rel = path.relative_to(package_dir).with_suffix("")
        name = ".".join(rel.parts[:-1] if rel.name == "__init__" else rel.parts)
        if not name:
            continue
        mods, priv = module_imports(path.read_text(), package_dir=package_dir)
        # a submodule's import of its own package's names is the package being set up
        graph[name] = {m for m in mods if m != name and not name.startswith(m + ".")}
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
    src = ("from dgdm_tf.pretrain import kernel as P\nimport dgdm_tf.core.ops\n"
           "from dgdm_tf.data import files\n"
           "def f():\n    from dgdm_tf.report.plots import _save, plot\n"
           "    return P._tiles(1) + files._x\n")
    mods, private = module_imports(src)
    assert mods == {"pretrain.kernel", "core.ops", "report.plots", "data.files"}
    assert private == ["data.files._x", "pretrain.kernel._tiles", "report.plots._save"]
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_the_library_has_no_import_cycle():
    graph, _ = import_graph()
    assert len(graph) > 20
    assert find_cycle(graph) is None, f"import cycle: {' -> '.join(find_cycle(graph))}"


def test_the_library_imports_itself_by_absolute_names():
    """``from dgdm_tf.x import y``, never ``from . import y``: a relative import means
    another module once a file moves into a subpackage (and the checks above read
    absolute imports)."""
    relative = [f"{p.relative_to(PACKAGE)}:{n.lineno}" for p in sorted(PACKAGE.rglob("*.py"))
                for n in ast.walk(ast.parse(p.read_text()))
                if isinstance(n, ast.ImportFrom) and n.level > 0]
    assert relative == []


def test_no_module_uses_another_modules_private_names():
    _, private = import_graph()
    assert private == {}, f"private names used across modules: {private}"


def test_no_probe_uses_the_librarys_private_names():
    """The probes (experiments/) call the library as any user would: a private name a
    probe reaches into can change or go with no test of the library noticing, and the
    probe stops reproducing its finding (tests/test_experiments.py runs them)."""
    private = {str(p.relative_to(EXPERIMENTS)): priv for p in sorted(EXPERIMENTS.rglob("*.py"))
               if (priv := module_imports(p.read_text())[1])}
    assert private == {}, f"private library names in the probes: {private}"


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


#: the library's packages, bottom to top: a module imports from its own package or from
#: a lower floor only (docs/design.md draws it)
FLOORS = [{"io"}, {"core"}, {"mcmc", "data"}, {"baselines", "supervised"}, {"report"},
          {"pretrain"}, {"topdown"}, {"mcem"}, {"bench"}]
MAX_LINES = 500


def package_edges(graph: dict[str, set[str]]) -> set[tuple[str, str]]:
    """(package, package it imports) for every import that leaves its package."""
    return {(a.split(".")[0], b.split(".")[0]) for a, deps in graph.items() for b in deps
            if a.split(".")[0] != b.split(".")[0]}


def upward(edges, floors=FLOORS) -> list[tuple[str, str]]:
    """The edges that import from the same floor's other package or from a higher one."""
    level = {p: i for i, ps in enumerate(floors) for p in ps}
    return sorted((a, b) for a, b in edges if level.get(a, -1) <= level.get(b, len(floors)))


def test_the_floor_check_catches_an_upward_import():
    assert upward({("core", "io"), ("topdown", "pretrain")}) == []
    assert upward({("core", "pretrain"), ("mcmc", "data"), ("new", "io")}) == [
        ("core", "pretrain"), ("mcmc", "data"), ("new", "io")]


def test_packages_import_down_the_floors_only():
    graph, _ = import_graph()
    packages = {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").is_file()}
    assert packages == set().union(*FLOORS), "a new package needs its floor in FLOORS"
    assert upward(package_edges(graph)) == []


def test_no_module_is_over_500_lines():
    long = {str(p.relative_to(PACKAGE)): n for p in sorted(PACKAGE.rglob("*.py"))
            if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert long == {}, f"split these by concern: {long}"
