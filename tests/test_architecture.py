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
# One folder per API shape (its `spec.py` declares it), and the OpenAI-compatible platforms' folder.
API_FOLDERS = tuple(sorted(p.parent.name for p in (PACKAGE / "providers").glob("*/spec.py")) + ["platforms"])
# providers/ modules below the folders: what a folder builds on, reading no declaration. Every other
# providers/ module reads the declarations (the registry and what chooses by it) and is above them.
PROVIDER_CORE = {
    "backends",
    "batch",
    "cache_layout",
    "errors",
    "file_batch",
    "ids",
    "results",
    "spec",
    "bodies.families",
    "bodies.schema",
    "routing.endpoints",
    "sync.call",
}
# A folder that is a variant of another's API builds on that folder's pieces, as inspect_ai's
# `TogetherBatcher(OpenAIBatcher)` does: Mistral's, OpenRouter's, Together's, Fireworks' and xAI's batches and chat over
# OpenAI's client, every OpenAI-compatible platform over OpenAI's contract and dialect, Vertex's Gemini
# batches over Gemini's lines, contract, results and call.
VARIANTS = {
    ("mistral", "openai"),
    ("openrouter", "openai"),
    ("together", "openai"),
    ("fireworks", "openai"),
    ("xai", "openai"),  # xAI's chat completions, contract and dialect are OpenAI's; its batches over OpenAI's client
    ("platforms", "openai"),
    ("bedrock", "anthropic"),  # Claude on Bedrock: Anthropic's Messages body, dialect and results
    ("vertex", "google"),  # Gemini on Vertex: Gemini's lines, contract, results and call
    ("vertex_anthropic", "anthropic"),  # Claude on Vertex: Anthropic's ids, dialect, contract, results and call
    ("vertex_anthropic", "vertex"),  # ... over Vertex's jobs, settings and Cloud Storage
}
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
    return "core" if ".".join(parts[1:]) in PROVIDER_CORE else "dispatch"


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
    assert {"openai", "anthropic", "google", "mistral", "together"} <= set(API_FOLDERS)
    for api in API_FOLDERS:
        folder = PACKAGE / "providers" / api
        assert (folder / "__init__.py").is_file(), api
        if api != "platforms":
            assert (folder / "spec.py").is_file() and (folder / "batch.py").is_file(), api
    wrong = []
    for source, target, line in edges():
        a, b = provider_group(source), provider_group(target)
        if a is None or b is None or a == b:
            continue
        if a in API_FOLDERS and b == "dispatch":
            wrong.append(f"{source}:{line} imports {target}: a provider's folder imports only the core")
        if a in API_FOLDERS and b in API_FOLDERS and (a, b) not in VARIANTS:
            wrong.append(f"{source}:{line} imports {target}: another provider's folder (not a variant of it)")
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
DEFINED_IN = {"state.states", "state.migrations"}
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


# --- waits ------------------------------------------------------------------------------------

# Where a sleep is the point: the one clock, and the simulated provider's latency (a provider that
# takes its time) and its foreground loop.
SLEEPS_ALLOWED = {"util.clock"}


def calls_from_time(path: Path, name: str, module: str = "time") -> list[int]:
    """The lines of a module that call `<module>.<name>` (or a `<name>` imported from `<module>`)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    imported = {
        alias.asname or alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module == module
        for alias in node.names
        if alias.name == name
    }
    out = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr == name and isinstance(func.value, ast.Name):
            if func.value.id == module:
                out.append(node.lineno)
        elif isinstance(func, ast.Name) and func.id in imported:
            out.append(node.lineno)
    return out


def sleeps(path: Path) -> list[int]:
    """The lines of a module that call `time.sleep` or `asyncio.sleep` (or a `sleep` imported from either)."""
    return sorted(calls_from_time(path, "sleep") + calls_from_time(path, "sleep", "asyncio"))


def test_every_wait_goes_through_the_one_clock():
    stray = [
        f"{name}:{line}"
        for name, path in modules().items()
        if name not in SLEEPS_ALLOWED and layer_of(name) != "simulated"
        for line in sleeps(path)
    ]
    assert not stray, "a sleep outside util.clock (use clock.pause or clock.sleep, and clock.Backoff):\n" + "\n".join(
        stray
    )


def test_the_sleep_finder_sees_both_spellings(tmp_path: Path):
    planted = tmp_path / "m.py"
    planted.write_text(
        "import asyncio\nimport time\nfrom time import sleep as nap\n\ntime.sleep(1)\nnap(2)\nasyncio.sleep(3)\n",
        encoding="utf-8",
    )
    assert sleeps(planted) == [5, 6, 7]


def wall_clock_reads(path: Path) -> list[int]:
    """The lines of a module that read the wall clock (`time.time()`, or a `time` imported from `time`)."""
    return calls_from_time(path, "time")


def test_every_reading_of_the_clock_goes_through_the_one_clock():
    """`clock.now` is what a test shifts to play a client clock hours ahead of the provider's
    (`scenarios/test_clocks.py`): a `time.time()` beside it would read the real one. The simulated
    provider stands for another machine and keeps its own clock."""
    stray = [
        f"{name}:{line}"
        for name, path in modules().items()
        if name != "util.clock" and layer_of(name) != "simulated"
        for line in wall_clock_reads(path)
    ]
    assert not stray, "time.time() outside util.clock (use clock.now):\n" + "\n".join(stray)


def test_the_clock_finder_sees_both_spellings(tmp_path: Path):
    planted = tmp_path / "m.py"
    planted.write_text("import time\nfrom time import time as wall\n\ntime.time()\nwall()\n", encoding="utf-8")
    assert wall_clock_reads(planted) == [4, 5]


BACKOFF = re.compile(r"\*\s*2\s*\*\*")  # `first * 2 ** attempt`, not `2**20` bytes


def test_backoff_is_written_once():
    """A doubling wait is `clock.Backoff`'s: a second copy of the schedule drifts (one was uncapped)."""
    found = [
        f"{name}:{n}: {line.strip()}"
        for name, path in modules().items()
        if name != "util.clock" and layer_of(name) != "simulated"
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if BACKOFF.search(line) and not line.lstrip().startswith("#")
    ]
    assert not found, "\n".join(found)


# --- providers declare themselves -------------------------------------------------------------


# Each provider's knowledge is in its declaration (`providers.spec`): shared code reads it and never
# asks which provider it has. The names it would ask by: every API's and every prefix's, and the
# constants spelling them.
def _provider_names() -> tuple[set[str], set[str]]:
    from lexpilot_batch.providers.registry import APIS, PROVIDERS

    names = set(APIS) | set(PROVIDERS)
    return names, {n.upper().replace("-", "_") for n in names}


# Modules that hold a provider's own knowledge: its folder, and its part of the simulated provider.
def _owns_a_provider(name: str) -> bool:
    parts = name.split(".")
    return (parts[0] == "providers" and len(parts) > 2 and parts[1] in API_FOLDERS) or (
        parts[0] == "simulated" and parts[1] in SIMULATED_OWNERS
    )


# The simulated provider's modules of one API (its routes, handlers and error shape: `simulated.apis.*`),
# and why each other module of it may name one.
SIMULATED_OWNERS: set[str] = {"apis"}
NAME_BRANCHES_ALLOWED: dict[str, str] = {}


def _names_in(node: ast.AST, strings: set[str], constants: set[str]) -> list[str]:
    out = []
    for sub in ast.walk(node):
        if isinstance(sub, ast.Constant) and isinstance(sub.value, str) and sub.value in strings:
            out.append(repr(sub.value))
        elif isinstance(sub, ast.Name) and sub.id in constants:
            out.append(sub.id)
        elif isinstance(sub, ast.Attribute) and sub.attr in constants:
            out.append(sub.attr)
    return out


def provider_branches(path: Path) -> list[tuple[int, str]]:
    """Where a module compares a value with a provider's or an API's name (`==`, `!=`, `in`, a
    `match` case), by its string or by a constant spelling it."""
    strings, constants = _provider_names()
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Compare) and any(
            isinstance(op, (ast.Eq, ast.NotEq, ast.In, ast.NotIn)) for op in node.ops
        ):
            for side in (node.left, *node.comparators):
                found += [(node.lineno, name) for name in _names_in(side, strings, constants)]
        elif isinstance(node, ast.match_case):
            found += [(node.pattern.lineno, name) for name in _names_in(node.pattern, strings, constants)]
    return found


def test_no_shared_module_branches_on_a_provider_or_api_name():
    found = [
        f"{name}:{line}: {what}"
        for name, path in modules().items()
        if not _owns_a_provider(name) and name not in NAME_BRANCHES_ALLOWED
        for line, what in provider_branches(path)
    ]
    assert not found, "branches on a provider's name outside its folder (declare it in its spec instead):\n" + (
        "\n".join(found)
    )


def test_the_branch_finder_sees_strings_constants_and_match_cases(tmp_path: Path):
    planted = tmp_path / "m.py"
    planted.write_text(
        'if api == "anthropic":\n    pass\nif x in (OPENAI, GOOGLE):\n    pass\nmatch p:\n    case "groq":\n        pass\n'
        'if role == "judge":\n    pass\n',
        encoding="utf-8",
    )
    assert provider_branches(planted) == [(1, "'anthropic'"), (3, "OPENAI"), (3, "GOOGLE"), (6, "'groq'")]
