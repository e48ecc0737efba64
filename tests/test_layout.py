"""The test suite's own layout: `tests` is a package, what modules share is in `tests/helpers/` (or
a conftest's fixtures), no test module imports another, and nothing under `tests/` or `bench/` puts
a folder on `sys.path` (pyproject's `pythonpath` is the repository root alone). Each rule is checked
on the real tree, and on a small tree with one violation planted, so that none of them can pass
by finding nothing."""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - the project's dependency on Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
# Modules that may stand outside tests/helpers/: pytest's, and the tests themselves.
NOT_HELPERS = ("conftest.py", "__init__.py")


def python_files(folder: Path) -> Iterator[Path]:
    yield from (p for p in sorted(folder.rglob("*.py")) if "__pycache__" not in p.parts)


def _is_test_module(name: str) -> bool:
    return name.startswith("test_") or name == "conftest"


def _imported(tree: ast.AST, path: Path, tests: Path) -> Iterator[tuple[int, str]]:
    """Every module an import names (lazy ones inside functions too), dotted, with its line; a
    relative import resolved against `path`'s package, a `from package import name` also as
    `package.name` (the name may be a module)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                package = path.parent.relative_to(tests.parent).parts
                package = package[: len(package) - (node.level - 1)]
                base = ".".join([*package, *([base] if base else [])])
            yield node.lineno, base
            for alias in node.names:
                yield node.lineno, f"{base}.{alias.name}"


def imports_of_test_modules(tests: Path) -> list[str]:
    """Where a module under `tests` imports a test module (`test_*`) or a conftest, which pytest
    alone should load: whatever two modules share belongs in tests/helpers/ or a conftest's fixtures."""
    found = []
    for path in python_files(tests):
        for line, module in _imported(ast.parse(path.read_text(encoding="utf-8")), path, tests):
            # `test_x` (a test folder on sys.path) or `tests.<...>.test_x`, not another package's `test_*` name
            bare_or_ours = "." not in module or module.startswith("tests.")
            if bare_or_ours and _is_test_module(module.rpartition(".")[2]):
                found.append(f"{path.relative_to(tests.parent)}:{line} imports {module}")
    return found


def _is_sys_path(node: ast.AST) -> bool:
    return (
        isinstance(node, ast.Attribute)
        and node.attr == "path"
        and isinstance(node.value, ast.Name)
        and node.value.id == "sys"
    )


def sys_path_changes(folder: Path) -> list[str]:
    """Where a module under `folder` changes `sys.path` (`insert`, `append`, `extend`, an
    assignment, `+=`, `site.addsitedir`): a module must be imported by its package's name."""
    found = []
    for path in python_files(folder):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            changed = False
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                if node.func.attr in ("insert", "append", "extend") and _is_sys_path(node.func.value):
                    changed = True
                if node.func.attr == "addsitedir":
                    changed = True
            elif isinstance(node, (ast.Assign, ast.AugAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for target in targets:
                    if _is_sys_path(target) or (isinstance(target, ast.Subscript) and _is_sys_path(target.value)):
                        changed = True
            if changed:
                found.append(f"{path.relative_to(folder.parent)}:{getattr(node, 'lineno', '?')}")
    return found


def loose_helpers(tests: Path) -> list[str]:
    """Modules under `tests` that are neither a test module, a conftest, a package's `__init__`
    nor in tests/helpers/: a helper belongs there, named for its job."""
    helpers = tests / "helpers"
    return [
        path.relative_to(tests.parent).as_posix()
        for path in python_files(tests)
        if helpers not in path.parents and not path.name.startswith("test_") and path.name not in NOT_HELPERS
    ]


def folders_without_init(tests: Path) -> list[str]:
    """Folders of `tests` holding Python modules but no `__init__.py`: their modules would be
    imported by their bare names (and two `test_lines.py` would collide)."""
    folders = {path.parent for path in python_files(tests)}
    return sorted(f.relative_to(tests.parent).as_posix() for f in folders if not (f / "__init__.py").exists())


# --- the real tree -------------------------------------------------------------------------------


def test_no_test_module_imports_another_or_a_conftest() -> None:
    assert imports_of_test_modules(ROOT / "tests") == []


@pytest.mark.parametrize("folder", ["tests", "bench"])
def test_nothing_puts_a_folder_on_sys_path(folder: str) -> None:
    assert sys_path_changes(ROOT / folder) == []


def test_every_shared_module_stands_in_tests_helpers() -> None:
    assert loose_helpers(ROOT / "tests") == []


def test_every_test_folder_is_a_package() -> None:
    assert folders_without_init(ROOT / "tests") == []


def test_pytest_puts_only_the_repository_root_on_sys_path() -> None:
    """`tests` and `bench` are imported by their package names from the root; no test folder is
    put on `sys.path` by pyproject's `pythonpath`."""
    options = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["pytest"]["ini_options"]
    assert options.get("pythonpath", []) in ([], ["."])


# --- each rule on a planted violation ------------------------------------------------------------


def plant(tmp_path: Path, files: dict[str, str]) -> Path:
    """A `tests` tree under `tmp_path` that holds `files` (path -> text) beside a clean module."""
    tests = tmp_path / "tests"
    every = {"__init__.py": "", "helpers/__init__.py": "", "helpers/engine.py": "X = 1\n", **files}
    every.setdefault("engine/__init__.py", "")
    every.setdefault("engine/test_ok.py", "from tests.helpers.engine import X\n\n\ndef test_x():\n    assert X\n")
    for rel, text in every.items():
        (tests / rel).parent.mkdir(parents=True, exist_ok=True)
        (tests / rel).write_text(text, encoding="utf-8")
    return tests


@pytest.mark.parametrize(
    "source",
    [
        "from test_protocols import context\n",
        "from tests.benchmark.test_protocols import context\n",
        "from tests.benchmark import test_protocols\n",
        "import tests.benchmark.test_protocols\n",
        "from .test_other import thing\n",
        "from . import test_other\n",
        "def f():\n    from test_protocols import context\n",  # a lazy import
        "from conftest import STUDY_MODELS\n",
        "from tests.conftest import STUDY_MODELS\n",
    ],
)
def test_a_test_module_importing_another_is_found(tmp_path: Path, source: str) -> None:
    tests = plant(tmp_path, {"engine/test_planted.py": source})
    found = imports_of_test_modules(tests)
    assert found and all(x.startswith("tests/engine/test_planted.py:") for x in found), found


def test_another_packages_test_names_are_not_test_modules(tmp_path: Path) -> None:
    tests = plant(tmp_path, {"engine/test_planted.py": "from hypothesis.strategies import test_cases\n"})
    assert imports_of_test_modules(tests) == []


def test_a_helper_importing_another_helper_is_fine(tmp_path: Path) -> None:
    tests = plant(tmp_path, {"helpers/faults.py": "from tests.helpers.engine import X\nfrom . import engine\n"})
    assert imports_of_test_modules(tests) == []


@pytest.mark.parametrize(
    "source",
    [
        "import sys\nsys.path.insert(0, 'bench')\n",
        "import sys\nsys.path.append('bench')\n",
        "import sys\nsys.path.extend(['bench'])\n",
        "import sys\nsys.path = ['bench', *sys.path]\n",
        "import sys\nsys.path += ['bench']\n",
        "import sys\nsys.path[0:0] = ['bench']\n",
        "import site\nsite.addsitedir('bench')\n",
    ],
)
def test_a_sys_path_change_is_found(tmp_path: Path, source: str) -> None:
    tests = plant(tmp_path, {"bench/test_floor.py": source})
    assert sys_path_changes(tests) == [f"tests/bench/test_floor.py:{source.count(chr(10))}"]


def test_a_loose_helper_is_found(tmp_path: Path) -> None:
    tests = plant(tmp_path, {"engine_helpers.py": "X = 1\n", "report/__init__.py": "", "report/stat_sim.py": ""})
    assert loose_helpers(tests) == ["tests/engine_helpers.py", "tests/report/stat_sim.py"]


def test_a_folder_without_init_is_found(tmp_path: Path) -> None:
    tests = plant(tmp_path, {"study/test_runs.py": "def test_x():\n    pass\n"})
    assert folders_without_init(tests) == ["tests/study"]
