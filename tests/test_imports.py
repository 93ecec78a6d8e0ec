"""No import cycles in ``adjoint`` or ``simcore``, counting the imports inside functions
too (a cycle hidden in a function still ties the modules together: neither can be
understood, tested or changed without the other). Modules above reach the ones below
through imports; the way back is a builder's method (the frontend's mixins), a
registry (``library`` into ``frontend/array_calls.NUMPY_LINALG``) or a base class
moved down (``frontend/source.KernelFunction``). And ``experiments/`` never imports
``tests/``: what both use is the package ``adjoint.corpus``."""
import ast
import os

import pytest


def modules(root):
    """Dotted name -> path of every module under the package folder ``root`` (linked
    folders followed: simcore/models is the top-level models/)."""
    found = {}
    for folder, _, files in os.walk(root, followlinks=True):
        for f in files:
            if f.endswith(".py"):
                rel = os.path.relpath(os.path.join(folder, f), os.path.dirname(root))
                name = rel[:-3].replace(os.sep, ".")
                found[name.removesuffix(".__init__")] = os.path.join(folder, f)
    return found


def imported(name, path, mods):
    """The package's modules that module ``name`` imports, anywhere in it: for
    ``from X import a`` the module ``X.a`` if there is one, else ``X`` (a package's
    ``__init__``)."""
    package = name if path.endswith("__init__.py") else name.rpartition(".")[0]
    out = set()
    for node in ast.walk(ast.parse(open(path).read())):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = package.split(".")[:len(package.split(".")) - node.level + 1] \
                if node.level else []
            target = ".".join(base + ([node.module] if node.module else []))
            out |= {f"{target}.{a.name}" if f"{target}.{a.name}" in mods else target
                    for a in node.names}
    return {m for m in out if m in mods and m != name}


def cycles(graph):
    """The strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on, found = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = set()
            while not component or w != v:
                w = stack.pop()
                on.discard(w)
                component.add(w)
            if len(component) > 1:
                found.append(sorted(component))
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def import_graph(root):
    mods = modules(root)
    return {name: imported(name, path, mods) for name, path in mods.items()}


def test_experiments_do_not_import_tests(repo_root):
    """The experiments import the benchmark kernels from ``adjoint.corpus``: neither a test
    module nor a helper of the tests, nor ``tests/`` put on ``sys.path``."""
    tests = {p.stem for p in (repo_root / "tests").rglob("*.py")}
    for path in sorted((repo_root / "experiments").rglob("*.py")):
        tree = ast.parse(path.read_text())
        names = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import)
                 for a in n.names}
        names |= {n.module.split(".")[0] for n in ast.walk(tree)
                  if isinstance(n, ast.ImportFrom) and n.module and not n.level}
        assert not names & tests, (path.name, names & tests)
        assert not any(isinstance(n, ast.Constant) and n.value == "tests"
                       for n in ast.walk(tree)), f"{path.name} names the tests folder"


@pytest.mark.parametrize("package", ["adjoint", "simcore"])
def test_no_import_cycle(repo_root, package):
    graph = import_graph(str(repo_root / package))
    assert len(graph) > 10
    assert cycles(graph) == []


def test_imports_inside_functions_count(tmp_path):
    pkg = tmp_path / "p"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from . import b\n")
    (pkg / "b.py").write_text("def f():\n    from .a import g\n")
    (pkg / "c.py").write_text("import p.a\n")
    graph = import_graph(str(pkg))
    assert graph["p.b"] == {"p.a"} and graph["p.c"] == {"p.a"}
    assert cycles(graph) == [["p.a", "p.b"]]
