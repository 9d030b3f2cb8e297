"""The README's first command works on a fresh machine: CI proves it (.ci/first_run, before the
test extra is installed), and this suite checks from the source that every third-party module
the installed packages import comes with a dependency pyproject declares, so a missing one fails
here too, not only in CI."""

from __future__ import annotations

import ast
import functools
import importlib.metadata
import re
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from packaging.requirements import Requirement

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))

# Imports that are not the installed explorer's: (file, top-level module) -> why, and the extra
# (or "") that provides the module. Each must still be in the source (no stale exemption).
EXEMPT = {
    ("capture/bootstrap.py", "paddle"): ("uploaded and run under the training's own Paddle", "capture"),
    ("fixtures/paddle_train_tiny.py", "paddle"): ("a Paddle training script the profiler tests run", "capture"),
    ("fixtures/paddle_profile_sample.py", "paddle"): ("a Paddle script the profiler tests run", "capture"),
    ("fixtures/paddle_profile_sample.py", "paddle_train_tiny"): ("the script beside it, on its sys.path", ""),
}


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _names(requirements: list[str]) -> set[str]:
    return {_normal(Requirement(r).name) for r in requirements}


@dataclass(frozen=True)
class Use:
    file: str  # relative to the checkout
    line: int
    module: str  # the top-level module imported


def package_folders() -> dict[str, Path]:
    """Each package of [tool.setuptools] packages and the folder it is built from."""
    setuptools = PYPROJECT["tool"]["setuptools"]
    mapping = setuptools.get("package-dir", {})
    out = {}
    for package in setuptools["packages"]:
        parts = package.split(".")
        for n in range(len(parts), 0, -1):  # the longest mapped prefix
            prefix = ".".join(parts[:n])
            if prefix in mapping:
                out[package] = ROOT / mapping[prefix] / Path(*parts[n:])
                break
        else:
            out[package] = ROOT / Path(*parts)
    return out


def _guarded(parents: list[ast.AST], node: ast.AST) -> bool:
    """Inside `try: ... except ImportError` (an optional module) or `if TYPE_CHECKING:`."""
    child = node
    for parent in reversed(parents):
        if isinstance(parent, ast.Try) and child in parent.body:
            for handler in parent.handlers:
                caught = handler.type
                names = caught.elts if isinstance(caught, ast.Tuple) else [caught]
                if any(isinstance(n, ast.Name) and n.id in ("ImportError", "ModuleNotFoundError") for n in names):
                    return True
        if isinstance(parent, ast.If) and child in parent.body and "TYPE_CHECKING" in ast.unparse(parent.test):
            return True
        child = parent
    return False


@functools.cache
def third_party_imports() -> tuple[Use, ...]:
    """Every import of a module outside the standard library and npuscope, at any depth of each
    module of the installed packages (a function's import fails as surely, only later)."""
    uses = []
    for folder in package_folders().values():
        for path in sorted(folder.glob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))

            def visit(node: ast.AST, parents: list[ast.AST], path: Path = path) -> None:
                if isinstance(node, ast.Import | ast.ImportFrom) and not _guarded(parents, node):
                    modules = (
                        [a.name for a in node.names]
                        if isinstance(node, ast.Import)
                        else ([node.module] if node.level == 0 and node.module else [])
                    )
                    for module in modules:
                        top = module.split(".")[0]
                        if top not in sys.stdlib_module_names and top != "npuscope":
                            uses.append(Use(path.relative_to(ROOT).as_posix(), node.lineno, top))
                for child in ast.iter_child_nodes(node):
                    visit(child, [*parents, node])

            visit(tree, [])
    return tuple(uses)


def undeclared(uses: tuple[Use, ...], declared: set[str]) -> list[str]:
    """The uses no declared distribution provides, one line each."""
    providers = importlib.metadata.packages_distributions()
    problems = []
    for use in uses:
        if (use.file, use.module) in EXEMPT:
            continue
        dists = {_normal(d) for d in providers.get(use.module, [])}
        if not dists:  # not installed here (a marker for another Python, say): go by its name
            dists = {_normal(use.module)}
        if not dists & declared:
            problems.append(
                f"{use.file}:{use.line} imports {use.module} (distribution {', '.join(sorted(dists))}), "
                "which [project] dependencies does not declare"
            )
    return problems


def test_every_third_party_import_is_a_declared_dependency():
    uses = third_party_imports()
    assert {u.module for u in uses} >= {"polars", "textual", "orjson", "numpy"}  # the scan sees them
    assert undeclared(uses, _names(PYPROJECT["project"]["dependencies"])) == []


def test_the_import_check_fails_without_numpy():
    """Proof the check can fail: numpy left out of the declared dependencies is reported."""
    declared = _names(PYPROJECT["project"]["dependencies"]) - {"numpy"}
    problems = undeclared(third_party_imports(), declared)
    assert problems and all(" imports numpy " in p for p in problems), problems
    assert any(p.startswith("analysis/fusion.py:") for p in problems), problems


def test_exemptions_are_real_and_their_extras_declare_them():
    uses = {(u.file, u.module) for u in third_party_imports()}
    providers = importlib.metadata.packages_distributions()
    for (file, module), (why, extra) in EXEMPT.items():
        assert (file, module) in uses, f"stale exemption: {file} no longer imports {module} ({why})"
        if extra:
            declared = _names(PYPROJECT["project"]["optional-dependencies"][extra])
            dists = {_normal(d) for d in providers.get(module, [])} or {"paddlepaddle"}
            assert dists & declared, (file, module, extra)
        else:
            assert (ROOT / file).with_name(f"{module}.py").is_file(), (file, module)


def test_guarded_imports_are_left_out():
    source = (
        "try:\n    import optional_thing\nexcept ImportError:\n    pass\n"
        "if TYPE_CHECKING:\n    import typing_only\n"
        "def f():\n    import needed_later\n"
    )
    tree = ast.parse(source)
    seen = []

    def visit(node, parents):
        if isinstance(node, ast.Import):
            seen.append((node.names[0].name, _guarded(parents, node)))
        for child in ast.iter_child_nodes(node):
            visit(child, [*parents, node])

    visit(tree, [])
    assert seen == [("optional_thing", True), ("typing_only", True), ("needed_later", False)]


def _commands(path: Path) -> list[str]:
    """The script's command lines: comments and blank lines left out."""
    lines = path.read_text(encoding="utf-8").splitlines()
    return [line.strip() for line in lines if line.strip() and not line.strip().startswith("#")]


def test_ci_runs_first_run_after_debian_and_before_the_test_extra():
    lines = _commands(ROOT / ".ci" / "run")
    first_run = [i for i, line in enumerate(lines) if shlex.split(line)[-1:] == [".ci/first_run"]]
    assert len(first_run) == 1, lines
    (at,) = first_run
    debian = next(i for i, line in enumerate(lines) if "apt-get install" in line)
    extras = [i for i, line in enumerate(lines) if re.search(r"pip install .*\.\[[^]]*test", line)]
    assert extras, lines
    assert debian < at < min(extras), (debian, at, extras)


def test_first_run_installs_into_a_fresh_venv_as_the_readme_says():
    script = ROOT / ".ci" / "first_run"
    text = script.read_text(encoding="utf-8")
    lines = _commands(script)
    assert lines[0] == "#!/usr/bin/env bash" or text.startswith("#!/usr/bin/env bash")
    assert "set -euo pipefail" in lines
    assert "--system-site-packages" not in text
    assert re.search(r'-m venv "\$work/venv"', text)
    # The README's install, exactly: `pip install .` with the venv's pip.
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "```\npip install . && npuscope\n```" in readme
    assert re.search(r"\bpip install \.\)?$", text, re.MULTILINE), "first_run does not run `pip install .`"
    for command in ("npuscope report", "npuscope report --format json", "npuscope inspect", "npuscope compare"):
        assert command in text, command
    assert "tmux" in text and "send-keys -t first-run q" in text


@pytest.mark.parametrize("removed", ["numpy", "polars", "textual"])
def test_each_dependency_the_code_imports_is_needed(removed):
    """Leaving out any of them is caught (not only numpy)."""
    declared = _names(PYPROJECT["project"]["dependencies"]) - {removed}
    assert any(f" imports {removed} " in p for p in undeclared(third_party_imports(), declared))
