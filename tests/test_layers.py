"""Layers that hold (issue 33; docs/architecture.md, "Layers"): specs → engine → analyses → interfaces.

(a) nothing outside ``rackmath/cli/`` imports ``rackmath.cli`` (``__main__`` is the CLI's entry point);
(b) ``import rackmath`` — and the Python API's roofline and serve — load no interface library (typer, rich,
    matplotlib, fastapi);
(c) no import cycle among rackmath's modules, counting imports inside functions;
(d) below the interfaces, rackmath's own modules are imported at module level: an import inside a function is only
    for a heavy optional dependency, in one place each (the figures of ``plotting``: matplotlib; ``measure_torch`` and
    ``measure_curves``: torch) or the package's lazy attributes (``rackmath/__init__.py``).
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import rackmath

ROOT = Path(rackmath.__file__).resolve().parent
HEAVY = ("typer", "click", "rich", "matplotlib", "fastapi", "uvicorn", "pandas", "torch")


def _modules() -> dict[str, Path]:
    out = {}
    for p in ROOT.rglob("*.py"):
        parts = list(p.relative_to(ROOT.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = p
    return out


def _imports(mod: str, path: Path, mods: dict) -> set[str]:
    """Every rackmath module ``mod`` imports, at any depth of its code (module level or inside functions)."""
    tree = ast.parse(path.read_text())
    pkg = mod.split(".") if path.name == "__init__.py" else mod.split(".")[:-1]
    deps = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            deps |= {a.name for a in node.names if a.name.split(".")[0] == "rackmath"}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = pkg[: len(pkg) - (node.level - 1)]
                name = ".".join(base + ([node.module] if node.module else []))
            else:
                name = node.module or ""
            if name.split(".")[0] != "rackmath":
                continue
            for a in node.names:
                sub = f"{name}.{a.name}"
                deps.add(sub if sub in mods else name)
    return {d for d in deps if d != mod}


def _graph() -> dict[str, set[str]]:
    mods = _modules()
    return {m: {d for d in _imports(m, p, mods) if d in mods} for m, p in mods.items()}


def test_nothing_outside_cli_imports_cli():
    bad = sorted(f"{m} imports {d}" for m, deps in _graph().items()
                 if not m.startswith("rackmath.cli") and m != "rackmath.__main__"
                 for d in deps if d == "rackmath.cli" or d.startswith("rackmath.cli."))
    assert bad == []


def test_the_scan_sees_function_level_imports():
    """The graph is not vacuous: cli/serve imports analyses.serving.serve inside its command function."""
    g = _graph()
    assert "rackmath.analyses.serving.serve" in g["rackmath.cli.serve"]
    assert "rackmath.options" in g["rackmath.api"]


def test_import_rackmath_is_light():
    code = ("import sys, rackmath\n"
            "r = rackmath.roofline('llama-3.1-8b', 'h100', batch=8)\n"
            "s = rackmath.serve('llama-3.1-8b', 'h100', gpus=1, isl=100, osl=100, concurrency=4)\n"
            f"print(sorted(m for m in {HEAVY!r} if m in sys.modules))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         env={"PYTHONPATH": str(ROOT.parent), "PATH": "/usr/bin:/bin"})
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on, comps, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                comps.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return comps


def test_no_import_cycles():
    assert _cycles(_graph()) == []


def test_cycle_finder_finds_a_cycle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


#: The function-level imports of rackmath modules allowed below the interfaces: (importing module, imported module).
LAZY_ALLOWED = {"rackmath.plotting", "rackmath.measure_torch", "rackmath.measure_curves"}


def _function_level_imports(mods: dict | None = None) -> list[str]:
    out = []
    for mod, path in (mods or _modules()).items():
        parts = mod.split(".")
        if len(parts) > 1 and parts[1] in ("cli", "web", "plotting", "__main__", "measure_torch", "measure_curves") or mod == "rackmath":
            continue  # the interfaces, the optional torch module and the package's lazy attributes
        tree = ast.parse(path.read_text())
        top = {id(n) for n in tree.body}
        pkg = parts if path.name == "__init__.py" else parts[:-1]
        for node in ast.walk(tree):
            if not isinstance(node, ast.ImportFrom) or id(node) in top:
                continue
            name = ".".join(pkg[: len(pkg) - (node.level - 1)] + ([node.module] if node.module else [])) \
                if node.level else (node.module or "")
            if name.split(".")[0] != "rackmath":
                continue
            targets = {f"{name}.{a.name}" for a in node.names} | {name}
            if not any(t == allowed or t.startswith(allowed + ".") for t in targets for allowed in LAZY_ALLOWED):
                out.append(f"{mod}:{node.lineno} imports {name} inside a function")
    return out


def test_own_modules_are_imported_at_module_level():
    assert _function_level_imports() == []


def test_the_function_level_scan_sees_a_lazy_import(tmp_path):
    """The scan is not vacuous: a module of ``analyses`` that imported the engine inside a function is listed, one
    that imports ``plotting`` there (a figure: matplotlib) is not."""
    bad = tmp_path / "probe.py"
    bad.write_text("def f():\n    from ..engine import roofline\n    return roofline\n\n\n"
                   "def g():\n    from ..plotting import racks\n    return racks\n")
    assert _function_level_imports({"rackmath.analyses.probe": bad}) == [
        "rackmath.analyses.probe:2 imports rackmath.engine inside a function"]
