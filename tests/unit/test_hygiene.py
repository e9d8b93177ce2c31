"""Lint, format and type checks run with the tests, so the README's one test command covers them (and CI with it)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TREES = ["src", "tests", "scripts", "benchmarks"]


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", *args], cwd=ROOT, capture_output=True, text=True, check=False)


def test_ruff_check_is_clean() -> None:
    res = _run("ruff", "check", *TREES)
    assert res.returncode == 0, res.stdout[-4000:] + res.stderr[-2000:]


def test_ruff_format_is_clean() -> None:
    res = _run("ruff", "format", "--check", *TREES)
    assert res.returncode == 0, res.stdout[-4000:] + res.stderr[-2000:]


@pytest.mark.slow  # a cold mypy run takes about a minute
def test_mypy_is_clean() -> None:
    res = _run("mypy")  # the files of pyproject.toml: the core and the benchmark harness
    assert res.returncode == 0, res.stdout[-4000:] + res.stderr[-2000:]


def test_the_core_imports_nothing_of_the_benchmark_harness() -> None:
    """src/adaptstream is the product: the harness (benchmarks/adaptstream_bench) may import it, never the reverse,
    and no benchmark or report writer lives inside it."""
    core = ROOT / "src" / "adaptstream"
    offenders = [
        str(p.relative_to(ROOT))
        for p in core.rglob("*.py")
        if re.search(r"^\s*(from|import)\s+adaptstream_bench\b", p.read_text(), re.M)
    ]
    assert offenders == []
    assert not (core / "bench").exists()


def _import_graph(root: Path) -> dict[str, set[str]]:
    """Module -> the core modules it imports at import time (module-level statements; imports inside functions
    and ``if TYPE_CHECKING`` blocks run later or never, so they cannot make a load-order cycle)."""
    import ast

    mods = {}
    for p in root.rglob("*.py"):
        name = ".".join(p.relative_to(root.parent).with_suffix("").parts).removesuffix(".__init__")
        mods[name] = p
    graph: dict[str, set[str]] = {m: set() for m in mods}
    for m, p in mods.items():
        for node in ast.parse(p.read_text()).body:
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in mods else node.module
                         for a in node.names]  # fmt: skip
            graph[m] |= {n for n in names if n in mods and n != m}
    return graph


def test_the_core_has_no_import_cycles() -> None:
    """A package may import its own submodules (registries do), but no two modules may need each other to load."""
    import graphlib

    graph = _import_graph(ROOT / "src" / "adaptstream")
    try:
        list(graphlib.TopologicalSorter(graph).static_order())
    except graphlib.CycleError as e:
        pytest.fail(f"import cycle: {' -> '.join(e.args[1])}")


def test_bench_without_the_harness_says_how_to_install_it() -> None:
    code = (
        "import importlib.metadata as m; m.entry_points = lambda **k: []\n"
        "from adaptstream.cli import main; main(['bench', 'klink', '--queries', '4'])"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 1
    assert "the benchmark harness is not installed: pip install -e benchmarks" in done.stderr
    assert "Traceback" not in done.stderr


def test_a_broken_add_on_leaves_the_core_commands_working() -> None:
    code = (
        "import importlib.metadata as m\n"
        "class EP:\n"
        "    name = 'bench'\n"
        "    def load(self):\n"
        "        raise ImportError('adaptstream_bench is half installed')\n"
        "m.entry_points = lambda **k: [EP()]\n"
        "from adaptstream.cli import main; main(['partitioning', 'list'])"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and "prompt" in done.stdout
    assert "add-on commands 'bench' not loaded: ImportError: adaptstream_bench is half installed" in done.stderr


#: the import name of every package pyproject.toml declares (dependencies and extras) or the harness needs
DECLARED = {"pyspark", "pyarrow", "numpy", "pandas", "rich", "typer", "matplotlib", "numba", "redis",
            "torch", "lightgbm", "cupy", "adaptstream", "adaptstream_bench"}  # fmt: skip


def test_every_import_of_the_package_and_the_harness_is_a_declared_dependency() -> None:
    """A package that only happens to be installed here (click: typer vendors its own; cloudpickle: pyspark has
    one) passes every test on this machine and fails on a fresh one; the import graph must name only what
    pyproject.toml declares."""
    import ast

    undeclared = []
    for tree in ("src/adaptstream", "benchmarks/adaptstream_bench"):
        for p in (ROOT / tree).rglob("*.py"):
            for node in ast.walk(ast.parse(p.read_text())):
                if isinstance(node, ast.Import):
                    names = [a.name for a in node.names]
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    names = [node.module]
                else:
                    continue
                top = {n.split(".")[0] for n in names} - set(sys.stdlib_module_names) - DECLARED
                undeclared += [f"{p.relative_to(ROOT)}: {t}" for t in sorted(top)]
    assert undeclared == []
    text = (ROOT / "pyproject.toml").read_text()
    assert all(re.search(rf'"{name}\b', text) for name in ("pyspark", "pyarrow", "typer", "redis", "lightgbm"))
