"""The house rules of the package, checked (issue 24): folders are layers, each importing only from
those below it; one folder per provider, whose knowledge stays in it; modules small enough to read;
every state word spelled once.

The layers, lowest first (`docs/architecture.md`): `util` and the top-level `errors` know nothing of
the domain; `data` reads datasets; `benchmark` is what is asked and how it is scored; `providers`
speak the APIs; `state` is the workspace on disk; `study` a study before it runs; `simulated` the
APIs' test double; `engine` the wave loop where protocols meet providers; `report` and `status`
(side by side: neither needs the other), `estimate`, `doctor` read (and mend) a workspace;
`cli` parses and renders.
"""

from __future__ import annotations

import ast
import re
from collections import defaultdict
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "lexpilot_batch"
LAYERS = [
    ["errors", "util"],
    ["data"],
    ["benchmark"],
    ["providers"],
    ["state"],
    ["study"],
    ["simulated"],
    ["engine"],
    ["report", "status"],
    ["estimate"],
    ["doctor"],
    ["cli"],
]
RANK = {name: rank for rank, names in enumerate(LAYERS) for name in names}
TOP = {"__init__", "__main__"}  # the package itself: may import anything
API_FOLDERS = ("openai", "anthropic", "google")
# providers/ modules that choose among the API folders; every other providers/ module is below them.
PROVIDER_DISPATCH = {"backends", "contracts", "dialects", "lines", "results", "sync"}
MAX_LINES = 500


def modules() -> dict[str, Path]:
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE).with_suffix("").parts
        out[".".join(parts)] = path
    return out


def imports(path: Path) -> list[tuple[str, int]]:
    """Every module of the package `path` imports (function-level and TYPE_CHECKING imports too)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and not node.level:
            if node.module == "lexpilot_batch":
                found += [(f"lexpilot_batch.{a.name}", node.lineno) for a in node.names]
            elif node.module.startswith("lexpilot_batch."):
                found.append((node.module, node.lineno))
                found += [(f"{node.module}.{a.name}", node.lineno) for a in node.names]
        elif isinstance(node, ast.Import):
            found += [(a.name, node.lineno) for a in node.names if a.name.startswith("lexpilot_batch.")]
    return found


def layer_of(dotted: str) -> str:
    return dotted.split(".")[0]


def provider_group(dotted: str) -> str | None:
    """Within providers/: an API folder's name, `dispatch`, or `core`."""
    parts = dotted.split(".")
    if parts[0] != "providers" or len(parts) < 2:
        return None
    if parts[1] in API_FOLDERS:
        return parts[1]
    return "dispatch" if parts[1] in PROVIDER_DISPATCH else "core"


def edges() -> list[tuple[str, str, int]]:
    mods = modules()
    out = []
    for name, path in mods.items():
        for target, line in imports(path):
            rel = target.removeprefix("lexpilot_batch.")
            # `from lexpilot_batch.x import name`: the module, or a package's submodule
            while rel and rel not in mods:
                rel = rel.rpartition(".")[0]
            if rel and rel != name:
                out.append((name, rel, line))
    return out


def test_every_folder_and_top_level_module_has_a_layer():
    tops = {name.split(".")[0] for name in modules()}
    assert tops - TOP <= set(RANK), f"modules or folders with no layer: {sorted(tops - TOP - set(RANK))}"


def test_no_import_goes_up_a_layer_or_across_a_cycle():
    upward = []
    for source, target, line in edges():
        a, b = layer_of(source), layer_of(target)
        if a in TOP or a == b:
            continue
        if RANK[b] > RANK[a]:
            upward.append(f"{source}:{line} imports {target} ({b} is above {a})")
    assert not upward, "\n".join(upward)


def test_no_cycle_between_folders():
    graph: dict[str, set[str]] = defaultdict(set)
    for source, target, _ in edges():
        a, b = layer_of(source), layer_of(target)
        if a != b and a not in TOP:
            graph[a].add(b)
    seen: set[str] = set()

    def visit(node: str, path: list[str]) -> None:
        assert node not in path, f"a cycle between folders: {' -> '.join([*path, node])}"
        if node in seen:
            return
        seen.add(node)
        for nxt in graph[node]:
            visit(nxt, [*path, node])

    for node in list(graph):
        visit(node, [])


def test_each_provider_has_its_folder_and_its_knowledge_stays_in_it():
    for api in API_FOLDERS:
        folder = PACKAGE / "providers" / api
        assert (folder / "__init__.py").is_file() and (folder / "batch.py").is_file(), api
    wrong = []
    for source, target, line in edges():
        a, b = provider_group(source), provider_group(target)
        if a is None or b is None or a == b:
            continue
        if a in API_FOLDERS and b in (*API_FOLDERS, "dispatch"):
            wrong.append(f"{source}:{line} imports {target}: a provider's folder imports only the core")
        if a == "core" and b != "core":
            wrong.append(f"{source}:{line} imports {target}: the providers' core imports no provider")
    assert not wrong, "\n".join(wrong)


def test_providers_know_nothing_of_the_workspace():
    for source, target, line in edges():
        if layer_of(source) == "providers":
            assert RANK[layer_of(target)] < RANK["providers"] or layer_of(target) == "providers", (
                f"{source}:{line} imports {target}"
            )


def test_no_product_module_is_over_500_lines_and_the_top_level_is_small():
    long = {
        name: n
        for name, path in modules().items()
        if not name.startswith("simulated") and (n := len(path.read_text(encoding="utf-8").splitlines())) > MAX_LINES
    }
    assert not long, f"modules over {MAX_LINES} lines: {long}"
    top_modules = [p.name for p in PACKAGE.glob("*.py")]
    assert len(top_modules) <= 6, top_modules


def test_the_cli_holds_no_sql():
    for name, path in modules().items():
        if layer_of(name) == "cli":
            text = path.read_text(encoding="utf-8")
            assert not re.search(r"\b(SELECT|INSERT|UPDATE|DELETE)\b[^\n]*\b(FROM|INTO|SET)\b", text), name
            assert ".execute(" not in text, name


# --- state words ------------------------------------------------------------------------------

STATE_WORDS = {
    # threads, requests, files (`state.states`), and the kinds a request fails as
    "active", "done", "pending", "answered", "discarded", "compiled", "uploaded", "creating",
    "submitted", "downloaded", "ingested", "lost", "transport", "invalid", "refusal", "permanent",
    "unexecuted",
}  # fmt: skip
# A batch's statuses are the providers' words (`providers.base.BatchStatus`, and each folder's map
# of its API's states onto them); "failed" is also a thread's and a request's.
BATCH_WORDS = {"completed", "failed", "expired", "cancelled", "cancelling", "in_progress", "validating", "finalizing"}
# The vocabulary itself, and the released migrations, whose SQL stays as it was released.
DEFINED_IN = {"state.states", "state.store"}
# A quoted word, alone or inside SQL (`status = 'done'`).
_WORDS = "|".join(sorted(STATE_WORDS | BATCH_WORDS))
QUOTED = re.compile(r"""(?<![\w])(['"])(""" + _WORDS + r""")\1""")


SQL = re.compile(r"\b(SELECT|UPDATE|INSERT|DELETE|WHERE)\b")
STATE_KEYWORDS = {"status", "batch_status", "error_kind", "kind"}


def state_strings(path: Path) -> list[tuple[int, str]]:
    """The string constants of a module that spell a state as a value: a word quoted inside SQL, or
    a word compared with (`==`, `in`), passed as a `status=`-like keyword, or a key of a mapping
    looked up at once (`{"done": ...}[status]`). A word that names a field (a JSON key, a table
    column) is no state and is left alone."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: list[tuple[int, str]] = []

    def words_of(node: ast.AST) -> list[ast.Constant]:
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return [node]
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            return [c for e in node.elts for c in words_of(e)]
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in ("frozenset", "set", "tuple")
        ):
            return [c for a in node.args for c in words_of(a)]
        return []

    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and SQL.search(node.value):
            for match in QUOTED.finditer(node.value):
                found.append((node.lineno, f"in SQL: {match.group(2)!r}: {node.value[:60]}"))
        elif isinstance(node, ast.Compare):
            for side in (node.left, *node.comparators):
                found += [(c.lineno, str(c.value)) for c in words_of(side)]
        elif isinstance(node, ast.keyword) and node.arg in STATE_KEYWORDS:
            found += [(c.lineno, str(c.value)) for c in words_of(node.value)]
        elif isinstance(node, ast.Subscript) and isinstance(node.value, ast.Dict):
            found += [(c.lineno, str(c.value)) for k in node.value.keys if k is not None for c in words_of(k)]
    return found


def test_no_state_word_is_spelled_outside_its_definition():
    found = []
    for name, path in modules().items():
        # Providers know nothing of the workspace: what they spell is their APIs' words (a batch's
        # status, Anthropic's stop reason "refusal"); the simulated provider is their double.
        if name in DEFINED_IN or layer_of(name) in ("providers", "simulated"):
            continue
        words = STATE_WORDS | BATCH_WORDS
        for line, text in state_strings(path):
            word = text.split("'")[1] if text.startswith("in SQL") else text
            if word in words:
                found.append(f"{name}:{line}: {text[:90]!r}")
    assert not found, "state words spelled as strings (use state.states, providers.base.BatchStatus):\n" + "\n".join(
        found
    )
