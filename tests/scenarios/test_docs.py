"""The commands of README.md and of every page under docs/, rehearsed offline; their links checked.

Each shell block (info string empty, `bash`, `sh` or `shell`) is a session: its `lexpilot-batch`
commands run in order against one simulated workspace in a temporary folder, with
`--provider simulated`, `--limit 1`, `--poll-interval 0` and `--root` added where a command takes
them. The simulated provider refuses what the real ones refuse (a reasoning model's `max_tokens` or
temperature, `reasoning_effort` for another model), so a session that ends with every thread done
and no request failed shows the commands send bodies the providers accept. The rules, and what is
not rehearsed (output blocks, `# not rehearsed` blocks such as the manual backend's, where a person
runs the files elsewhere, and `serve-simulated`), are written for readers in docs/development.md.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

import pytest
from typer.testing import CliRunner

from lexpilot_batch.cli import app
from tests.helpers.hub import FakeHub, lexpilot_repo, point_library_at

# fsync off (conftest): durability is scenarios/test_crash.py's business. matplotlib lacks CJK glyphs here.
pytestmark = [pytest.mark.usefixtures("no_fsync"), pytest.mark.filterwarnings("ignore:Glyph .* missing from font")]

REPO = Path(__file__).resolve().parents[2]
README = REPO / "README.md"
PAGES = [README, *sorted((REPO / "docs").glob("*.md"))]
SHELL = {"", "bash", "sh", "shell"}
# The README's two set-up commands, byte for byte (.ci/run runs the second).
SETUP = (
    "python -m pip install -e . && lexpilot-batch run --stage all --provider simulated --run-id demo --model sim-eval"
    " --root demo",
    'python -m pip install -e ".[test]" && python -m pytest -q',
)
# Stands in, in every session's folder, for the dataset the user supplies.
REAL_DATASET = "LexPilot_release_multiturn.json"
NOT_REHEARSED = "# not rehearsed"
# Commands that need a person (or a server that runs until stopped) rather than a rehearsal.
NEEDS_A_PERSON = {"ingest"}
SKIPPED = {"serve-simulated"}  # the rehearsal's --provider simulated stands in for it
REDIRECTS = {">", ">>", "|", "2>", "2>&1", "&"}
# What the rehearsals must cover, so that the test cannot pass by rehearsing nothing.
WRITERS = {"prepare", "run", "submit", "poll-and-advance", "retry", "doctor"}
READERS = {"status", "report", "export", "validate-data"}
KEY_COMMANDS = WRITERS | READERS
REPORT_FORMATS = {"table", "markdown", "latex", "csv", "json", "html"}
KEY_FLAGS = (("doctor", "--repair"), ("prepare", "--dry-run"), ("report", "--figures"), ("poll-and-advance", "--wait"))
NEEDLES = (
    "openai/o4-mini",
    "dashscope/qwen-plus",
    "deepseek/deepseek-chat",
    "azure/",
    "anthropic/",
    "google/",
    "--models",
    "hf://datasets/Medivvv/LexPilot",
)
# Ends a session: whatever its commands left unfinished is finished before the workspace is checked.
FINISH = ["poll-and-advance", "--submit", "--wait", "--poll-interval", "0", "--provider", "simulated"]

runner = CliRunner()


@dataclass
class Block:
    page: Path
    line: int  # of the opening fence, 1-based
    info: str
    text: str
    first: list[str] = field(default_factory=list)  # `<!-- rehearsal first: COMMAND -->`
    file: str | None = None  # `<!-- rehearsal file: NAME -->`

    @property
    def name(self) -> str:
        return f"{self.page.relative_to(REPO).as_posix()}:{self.line}"

    @property
    def rehearsed(self) -> bool:
        return self.info in SHELL and NOT_REHEARSED not in self.text


DIRECTIVE = re.compile(r"^<!-- rehearsal (first|file): (.+?) -->$")


def _blocks(page: Path) -> list[Block]:
    blocks: list[Block] = []
    lines = page.read_text(encoding="utf-8").splitlines()
    current: Block | None = None
    body: list[str] = []
    for number, line in enumerate(lines, 1):
        if line.startswith("```"):
            if current is None:
                current, body = Block(page, number, line[3:].strip(), ""), []
                above = number - 2
                while above >= 0 and (match := DIRECTIVE.match(lines[above])):
                    if match.group(1) == "first":
                        current.first.insert(0, match.group(2))
                    else:
                        current.file = match.group(2)
                    above -= 1
            else:
                current.text = "\n".join(body) + "\n"
                blocks.append(current)
                current = None
        elif current is not None:
            body.append(line)
    assert current is None, f"{page.name}: a fenced block is never closed"
    return blocks


BLOCKS = [block for page in PAGES for block in _blocks(page)]


def _command_lines(text: str, continuation: str = "\\") -> list[str]:
    """The `lexpilot-batch` command lines of a block, continuations joined, `&&` chains split."""
    joined = text.replace(continuation + "\n", " ")
    found = []
    for line in joined.splitlines():
        for part in line.split("&&"):
            part = part.strip()
            if part.startswith("lexpilot-batch "):
                found.append(part)
    return found


def _words(line: str) -> list[str]:
    """A command line's words after `lexpilot-batch`, comments and redirections left out."""
    words = shlex.split(line, comments=True)[1:]
    for i, word in enumerate(words):
        if word in REDIRECTS:
            return words[:i]
    return words


def _commands(block: Block) -> list[list[str]]:
    continuation = "`" if block.info == "powershell" else "\\"
    return [_words(line) for line in _command_lines(block.text, continuation)]


@cache
def _options(subcommand: str) -> frozenset[str] | None:
    """The options `lexpilot-batch SUBCOMMAND --help` lists, or None when it does not exit 0."""
    result = runner.invoke(app, [subcommand, "--help"], terminal_width=250, env={"COLUMNS": "250"})
    if result.exit_code != 0:
        return None
    names: set[str] = set()
    for line in result.output.splitlines():
        if line.startswith("  -"):
            names.update(re.findall(r"--[a-z][a-z0-9-]*", re.split(r"\s{2,}", line.strip())[0]))
    return frozenset(names)


def _without(args: list[str], option: str) -> list[str]:
    """`args` without `option` and its value (`--option VALUE` or `--option=VALUE`)."""
    out, skip = [], False
    for word in args:
        if skip:
            skip = False
        elif word == option:
            skip = True
        elif not word.startswith(option + "="):
            out.append(word)
    return out


def _with(args: list[str], option: str, value: str) -> list[str]:
    """`args` with `option` set to `value`, any value the page gave it replaced."""
    return [*_without(args, option), option, value]


def _rehearsal(args: list[str], folder: Path) -> tuple[list[str], Path | None]:
    """The command as rehearsed, and the workspace root it uses (None: it takes no root)."""
    options = _options(args[0]) or frozenset()
    root: Path | None = None
    for name in ("--root", "--output-root"):
        if name in args:
            root = folder / args[args.index(name) + 1]
            args = _without(args, name)
    if "--root" in options:
        root = root or folder / "ws"
        args = [*args, "--root", str(root)]
    if "--provider" in options:
        args = _with(args, "--provider", "simulated")
    if "--limit" in options:
        args = _with(args, "--limit", "1")
    if "--poll-interval" in options:
        args = _with(args, "--poll-interval", "0")
    if "--sim-faults" in args:  # the simulated batches' latency is the bench's business, not a rehearsal's
        spec = args[args.index("--sim-faults") + 1]
        args = _with(args, "--sim-faults", re.sub(r"(?<![a-z_])latency=[^,]*", "latency=0", spec))
    return args, root


def _invoke(args: list[str]) -> str:
    result = runner.invoke(app, args)
    assert result.exit_code == 0, f"lexpilot-batch {shlex.join(args)}:\n{result.output}\n{result.exception!r}"
    return result.output


def _session_commands(block: Block) -> list[list[str]]:
    first = [_words(line) for line in block.first]
    return [c for c in [*first, *_commands(block)] if c and c[0] not in SKIPPED]


REHEARSED = [block for block in BLOCKS if block.rehearsed and _session_commands(block)]
FILES = {block.file: block.text for block in BLOCKS if block.file}


@pytest.fixture
def clean_shell(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Path]:
    """A session's folder: no key, endpoint or backend of the shell running the tests; `data/`, the
    stand-in for the real dataset and every `rehearsal file` in it; and a stand-in for the Hugging
    Face Hub serving the benchmark's dataset `Medivvv/LexPilot` (`helpers.hub`), at which
    `huggingface_hub` is pointed, with a cache of the session's own."""
    for name in list(os.environ):
        if name.endswith(("_API_KEY", "_BASE_URL", "_BACKEND", "_PROFILE")) or name.startswith("LEXPILOT_"):
            monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)
    shutil.copytree(REPO / "data", tmp_path / "data")
    shutil.copyfile(REPO / "data" / "sample_cases.json", tmp_path / REAL_DATASET)
    for name, text in FILES.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    hub = FakeHub({"Medivvv/LexPilot": lexpilot_repo()[0]})
    with hub.serving():
        point_library_at(monkeypatch, hub, tmp_path / "hf")
        yield tmp_path


def _param(block: Block) -> object:
    """A block whose simulated batches take real seconds (a `latency` key in its faults) is a long
    simulation, run with the slow ones (about a minute for docs/simulated.md's faults example)."""
    waits = any("latency=" in word for command in _session_commands(block) for word in command)
    return pytest.param(block, id=block.name, marks=[pytest.mark.slow] if waits else [])


@pytest.mark.parametrize("block", [_param(block) for block in REHEARSED])
def test_a_block_rehearsed_offline_finishes_with_every_request_accepted(block: Block, clean_shell: Path):
    roots: set[Path] = set()
    writes = False
    for args in _session_commands(block):
        rehearsal, root = _rehearsal(args, clean_shell)
        _invoke(rehearsal)
        if root is not None:
            roots.add(root)
        writes = writes or (args[0] in ("prepare", "run") and "--dry-run" not in args)
    workspaces = [root for root in roots if (root / "state").is_dir()]
    assert workspaces or not writes, f"{block.name}: its commands left no workspace"
    faults = any("--sim-faults" in args for args in _session_commands(block))
    for root in workspaces:
        _invoke([*FINISH, "--root", str(root)])
        status = json.loads(_invoke(["status", "--format", "json", "--root", str(root)]))
        tasks = [task for run in status["runs"] for task in run["tasks"].values()]
        assert tasks and all(t["done"] == t["total"] and not t["failed"] for t in tasks), (block.name, tasks)
        failed = {role: counts["failed"] for role, counts in status["requests"].items() if counts["failed"]}
        # A session that asks for faults sees failed attempts, retried; the threads still finish.
        assert faults or not failed, (block.name, failed, status["failed_threads"])
        assert not status["anomalies"], (block.name, status["anomaly_kinds"])


def test_the_rehearsals_cover_the_commands_these_pages_show():
    """The control: a test that found no command would pass by rehearsing none."""
    commands = [c for block in REHEARSED for c in _session_commands(block)]
    ran = {c[0] for c in commands}
    assert ran >= KEY_COMMANDS, KEY_COMMANDS - ran
    formats = {c[c.index("--format") + 1] if "--format" in c else "table" for c in commands if c[0] == "report"}
    assert formats >= REPORT_FORMATS, REPORT_FORMATS - formats
    layouts = {c[c.index(o) + 1] for c in commands if c[0] == "export" for o in ("--layout", "--format") if o in c}
    assert layouts >= {"cases", "seed", "inspect"}, layouts
    for command, flag in KEY_FLAGS:
        assert any(c[0] == command and flag in c for c in commands), (command, flag)
    text = " ".join(" ".join(c) for c in commands)
    for needle in (*NEEDLES, REAL_DATASET):
        assert needle in text, needle
    readme = [block for block in REHEARSED if block.page == README]
    assert len(readme) >= 3, "the set-up command, the workflow and the real-provider example"
    assert len(commands) >= 40 and len(REHEARSED) >= 15, (len(commands), len(REHEARSED))
    assert "models.toml" in FILES


def test_a_rehearsed_block_needs_no_person():
    """A block that leaves files to a person (the manual backend, `ingest FILE`) says it is not rehearsed."""
    for block in REHEARSED:
        for args in _session_commands(block):
            assert args[0] not in NEEDS_A_PERSON and "manual" not in args, (
                f"{block.name}: `lexpilot-batch {shlex.join(args)}` needs a person: mark the block `{NOT_REHEARSED}: WHY`"
            )


def _inline_commands(page: Path) -> list[list[str]]:
    """`lexpilot-batch ...` spans of inline code in the prose of a page."""
    prose = re.sub(r"^```.*?^```", "", page.read_text(encoding="utf-8"), flags=re.S | re.M)
    spans = re.findall(r"`(lexpilot-batch [^`]+)`", prose.replace("\n", " "))
    return [_words(span) for span in spans if not re.search(r"lexpilot-batch [A-Z]", span)]


def test_every_command_shown_names_a_subcommand_and_options_that_exist():
    """Rehearsed or not (output, PowerShell, the manual backend, prose), a command shown exists."""
    shown = [(b.name, c) for b in BLOCKS for c in _commands(b) + [_words(line) for line in b.first]]
    shown += [(page.name, c) for page in PAGES for c in _inline_commands(page)]
    assert len(shown) >= 60
    for where, args in shown:
        options = _options(args[0])
        assert options is not None, f"{where}: `lexpilot-batch {args[0]}` is no command"
        unknown = {w.split("=")[0] for w in args[1:] if w.startswith("--")} - options
        assert not unknown, f"{where}: `lexpilot-batch {shlex.join(args)}`: {sorted(unknown)} not in its --help"


def test_each_powershell_block_mirrors_a_shell_block_of_the_readme():
    readme = [_commands(b) for b in BLOCKS if b.page == README and b.info in SHELL]
    powershell = [b for b in BLOCKS if b.info == "powershell"]
    assert len(powershell) >= 4
    assert sum(1 for b in powershell if _commands(b)) >= 3
    for block in powershell:
        assert _commands(block) in readme, f"{block.name}: no shell block of the README has these commands"


def test_the_readme_keeps_its_two_set_up_commands_and_stays_short():
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 300
    plain = [line for b in BLOCKS if b.page == README for line in b.text.splitlines()]
    for command in SETUP:
        assert command in plain, command


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation but `-` and `_` dropped, spaces to `-`."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def _anchors(page: Path) -> set[str]:
    text = re.sub(r"^```.*?^```", "", page.read_text(encoding="utf-8"), flags=re.S | re.M)
    return {_slug(m) for m in re.findall(r"^#{1,6} (.+)$", text, flags=re.M)}


def _links(page: Path) -> list[str]:
    text = re.sub(r"^```.*?^```", "", page.read_text(encoding="utf-8"), flags=re.S | re.M)
    text = re.sub(r"`[^`]*`", "", text)
    return re.findall(r"\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)", text)


def test_every_relative_link_resolves():
    checked = 0
    for page in PAGES:
        for link in _links(page):
            if re.match(r"^[a-z]+:", link):
                continue
            path, _, anchor = link.partition("#")
            target = (page.parent / path).resolve() if path else page
            assert target.exists(), f"{page.name}: {link} names no file"
            if anchor:
                assert target.suffix == ".md" and anchor in _anchors(target), f"{page.name}: {link} names no heading"
            checked += 1
    assert checked >= 40


def test_every_docs_page_is_linked_from_the_readme():
    linked = {(README.parent / link.partition("#")[0]).resolve() for link in _links(README)}
    for page in PAGES[1:]:
        assert page.resolve() in linked, f"{page.name} is not linked from the README"
