"""Runs: registering a (run id, evaluated model) with its manifest, and creating its threads.

A manifest pins everything that decides a run's results: dataset hash, selected cases, the
cause-class mapping's hash, code and prompt hashes, the three models, endpoints (never keys),
generation settings, package version, and, for provider-qualified models or per-model arguments,
what each role's requests carry (`requests`: provider, model sent, body fields; `providers.bodies.request`).
Re-running with the same run id and the same manifest resumes; any difference is refused with
every differing field named, because mixing settings inside one run would silently corrupt it.
A run's cases are copied into the workspace from the dataset file once per dataset: later runs of
the same file find them there.
"""

from __future__ import annotations

import ast
import hashlib
import json
import sqlite3
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from lexpilot_batch import __version__
from lexpilot_batch.benchmark import prompts
from lexpilot_batch.benchmark.protocols import PROTOCOLS, tasks_for_stage
from lexpilot_batch.benchmark.settings import ROLES, Settings
from lexpilot_batch.data import Case, DatasetFile, HubFile
from lexpilot_batch.data.categories import grouped
from lexpilot_batch.data.dataset import bundled_sample_sha256
from lexpilot_batch.errors import ConfigError, ManifestMismatch
from lexpilot_batch.providers.bodies.request import RoleRequest, legacy_request
from lexpilot_batch.providers.routing.endpoints import endpoint_identity
from lexpilot_batch.state.runs import copy_cases, insert_run, keep_categories, set_speculate
from lexpilot_batch.state.threads import insert_threads
from lexpilot_batch.state.workspace import Workspace, slug
from lexpilot_batch.study.model_list import ModelOptions
from lexpilot_batch.study.values import check_one_value
from lexpilot_batch.util import clock
from lexpilot_batch.util.fileio import write_atomic
from lexpilot_batch.util.text import counted, has_unsafe_characters

_PACKAGE = Path(__file__).resolve().parents[1]  # lexpilot_batch/
# The code that decides what is asked and how answers are read: changing it changes results. Each
# is hashed under a label of its own, not its path, so that moving a module changes nothing.
_RESULT_CODE = {
    "prompts.py": _PACKAGE / "benchmark" / "prompts.py",
    "judges.py": _PACKAGE / "benchmark" / "judges.py",
    "data": _PACKAGE / "data",
    "protocols": _PACKAGE / "benchmark" / "protocols",
}
# Fields that are informative only: a different value does not make a different experiment.
# A dataset's commit among them: the same bytes at another commit of its repository are the same data.
_INFORMATIVE = {"created_at", "version", "dataset_path", "dataset_commit", "categories_path", "bundled_sample"}


def code_hash() -> str:
    """The SHA-256 of the result code (`_RESULT_CODE`), its imports of the package left out: where a
    module it uses lives decides nothing."""
    digest = hashlib.sha256()
    for label, target in _RESULT_CODE.items():
        files = sorted(target.rglob("*.py")) if target.is_dir() else [target]
        for path in files:
            name = label if path == target else f"{label}/{path.relative_to(target).as_posix()}"
            digest.update(name.encode())
            digest.update(_without_own_imports(path.read_bytes().replace(b"\r\n", b"\n")))
    return digest.hexdigest()


def _without_own_imports(source: bytes) -> bytes:
    """A module's source without its `import lexpilot_batch...` / `from lexpilot_batch... import` statements."""
    lines = source.split(b"\n")
    drop: set[int] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom):
            own = (node.module or "").split(".")[0] == "lexpilot_batch" and not node.level
        elif isinstance(node, ast.Import):
            own = any(a.name.split(".")[0] == "lexpilot_batch" for a in node.names)
        else:
            continue
        if own:
            drop.update(range(node.lineno - 1, node.end_lineno or node.lineno))
    return b"\n".join(line for i, line in enumerate(lines) if i not in drop)


def run_key(run_id: str, model: str) -> str:
    """Eight hex digits that start every custom_id of the run: short, ASCII, deterministic."""
    return hashlib.sha256(f"{run_id}\0{model}".encode()).hexdigest()[:8]


def check_run_id(run_id: str) -> str:
    run_id = run_id.strip()
    # Run ids and models are printed by status and report: nothing in them may drive a terminal.
    if not run_id or len(run_id) > 100 or has_unsafe_characters(run_id):
        raise ConfigError("--run-id must be 1-100 printable characters")
    check_one_value(run_id, "--run-id")
    return run_id


def check_model(model: str | None, option: str = "--model") -> str:
    if not model or not model.strip():
        raise ConfigError(f"no evaluated model: pass {option} or set LEXPILOT_MODEL (none is chosen for you)")
    if len(model) > 200 or has_unsafe_characters(model):
        raise ConfigError(f"{option} must be 1-200 printable characters")
    check_one_value(model.strip(), option)
    return model.strip()


def check_case_limit(limit: int | None) -> None:
    if limit is not None and limit < 1:
        raise ConfigError("--limit must be at least 1")


def selected_cases(n_cases: int, limit: int | None) -> list[int]:
    """The indices of the cases a run selects from a dataset of `n_cases`: the first `limit`, or all."""
    check_case_limit(limit)
    return list(range(n_cases))[: limit or None]


def check_key_free(run_id: str, model: str, holder: tuple[str, str] | None) -> None:
    """Refuse a run whose key is already held by another (run id, model), `holder`."""
    # A 32-bit hash collision: vanishingly rare, but never silent.
    if holder is not None and holder != (run_id, model):
        raise ConfigError(f"run {run_id!r} collides with run {holder[0]!r}; choose another --run-id")


@dataclass(frozen=True)
class RunSpec:
    """What `prepare` is asked for: the runs of one experiment, its stage, and everything that goes
    into their manifests (models, settings, dataset and case selection, prompts)."""

    run_ids: tuple[str, ...] = ("run1",)
    models: tuple[str, ...] = ()  # the evaluated models: no default, `check_model` says so
    stage: str = "all"
    settings: Settings = field(default_factory=Settings)
    dataset: Path | HubFile | None = None  # None: the bundled sample
    categories: Path | None = None  # None: the bundled mapping
    limit: int | None = None  # only the first N cases
    prompts: Path | None = None  # a prompts file replacing templates by name
    speculate: bool = False
    model_options: Mapping[str, ModelOptions] = field(default_factory=dict)  # by registered name
    reasoning_effort: str | None = None  # for OpenAI reasoning models
    # Model names (as registered) taken though their provider's catalogue does not list them
    # (`--allow-model`: a model newer than the catalogue); checked, never part of a manifest.
    allowed_models: frozenset[str] = frozenset()
    # Settings the command line left to their defaults (`user_model`, `judge_model`): a workspace's
    # recorded ones are used instead (`study.choices_memory`).
    defaulted: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        # One name given as a string is one model (and one run id), not a tuple of its characters.
        for name in ("run_ids", "models"):
            value = getattr(self, name)
            if isinstance(value, str):
                object.__setattr__(self, name, (value,))

    @property
    def tasks(self) -> tuple[str, ...]:
        return tasks_for_stage(self.stage)


@dataclass(frozen=True)
class Run:
    pk: int
    run_id: str
    model: str
    key: str
    manifest: dict

    @property
    def settings(self) -> Settings:
        return Settings(**self.manifest["settings"])


@dataclass(frozen=True)
class RunPlan:
    """The runs of one evaluated model as `prepare` registers them (`lineup.plan_runs`)."""

    model: str  # the evaluated model, as registered
    settings: Settings  # as applied: a setting no request carries is None (`bodies.request.applied_settings`)
    requests: dict[str, RoleRequest]  # what each role's requests carry
    endpoints: dict[str, str]  # where each role's requests go (`routes.Route.label`)
    # Where each role's requests go, as `prepare` says it (a rehearsal's, and where a real run's
    # would go): not part of the manifest.
    destinations: dict[str, str] = field(default_factory=dict)

    @property
    def legacy(self) -> bool:
        """Whether every role sends what a bare name always sent: then the manifest is as it always was."""
        return all(
            self.requests[role] == legacy_request(role, self.settings.model_for(role, self.model), self.settings)
            for role in ROLES
        )


def build_manifest(
    run_id: str,
    plan: RunPlan,
    dataset: DatasetFile,
    case_indices: list[int],
    templates: dict[str, str],
) -> dict:
    case_ids = dataset.case_ids
    manifest = {
        "run_id": run_id,
        "model": plan.model,
        "user_model": plan.settings.user_model,
        "judge_model": plan.settings.judge_model,
        "dataset_sha256": dataset.sha256,
        # A Hugging Face dataset's file: the commit its revision resolved to, beside its hash (and
        # `dataset_path` its URL as given), so that a later command reads the very same revision.
        **({"dataset_commit": dataset.hub.commit} if dataset.hub is not None else {}),
        "dataset_path": dataset.source,
        "bundled_sample": dataset.is_bundled_sample,
        "case_ids": [case_ids[i] for i in case_indices],
        "categories_sha256": dataset.categories_sha256,
        "categories_path": str(dataset.categories_path),
        "code_hash": code_hash(),
        "prompts_hash": prompts.templates_hash(templates),
        "settings": asdict(plan.settings),
        "endpoints": plan.endpoints,
    }
    if not plan.legacy:
        manifest["requests"] = {role: plan.requests[role].to_json() for role in ROLES}
    manifest["version"] = __version__
    manifest["created_at"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(clock.now()))
    return manifest


def role_requests(manifest: Mapping[str, Any]) -> dict[str, RoleRequest]:
    """What each role's requests of the run with this manifest carry, as compiling sends them."""
    recorded = manifest.get("requests")
    if recorded is not None:
        return {role: RoleRequest.from_json(recorded[role]) for role in ROLES}
    settings = Settings(**manifest["settings"])
    return {role: legacy_request(role, settings.model_for(role, manifest["model"]), settings) for role in ROLES}


def check_readings(manifests: Iterable[Mapping[str, Any]], plan: RunPlan) -> None:
    """Refuse a model name that an earlier run of the workspace reads otherwise (registered as a
    bare name before provider prefixes existed): their files would take the same names."""
    reading = {plan.settings.model_for(role, plan.model): r.provider for role, r in plan.requests.items()}
    for manifest in manifests:
        for role, request in role_requests(manifest).items():
            name = Settings(**manifest["settings"]).model_for(role, manifest["model"])
            if name in reading and reading[name] != request.provider:
                raise ConfigError(
                    f"model {name!r} was sent as {'a bare name' if request.provider is None else request.provider} "
                    f"in run {manifest['run_id']!r} of this workspace; use another --root for this study"
                )


def used_bundled_sample(manifest: Mapping[str, Any]) -> bool:
    """Whether the run's dataset is the bundled sample (a demonstration, not a benchmark result).

    Manifests written before the field existed are told by their dataset's hash."""
    if "bundled_sample" in manifest:
        return bool(manifest["bundled_sample"])
    return manifest.get("dataset_sha256") == bundled_sample_sha256()


def manifest_differences(old: dict, new: dict) -> list[str]:
    # An endpoint is compared by identity: a loopback port or a manifest written before
    # identities existed does not make another experiment.
    old, new = _by_identity(old), _by_identity(new)
    diffs = []
    for name in sorted(set(old) | set(new)):
        if name in _INFORMATIVE or old.get(name) == new.get(name):
            continue
        if name == "case_ids":
            diffs.append(
                f"case_ids: {counted(len(old.get(name, [])), 'case')} selected before, {len(new.get(name, []))} now"
            )
        elif isinstance(old.get(name), dict) and isinstance(new.get(name), dict):
            for key in sorted(set(old[name]) | set(new[name])):
                if old[name].get(key) != new[name].get(key):
                    diffs.append(f"{name}.{key}: {old[name].get(key)!r} before, {new[name].get(key)!r} now")
        else:
            diffs.append(f"{name}: {old.get(name)!r} before, {new.get(name)!r} now")
    return diffs


def _by_identity(manifest: dict) -> dict:
    endpoints = manifest.get("endpoints")
    if not isinstance(endpoints, dict):
        return manifest
    return {**manifest, "endpoints": {role: endpoint_identity(url) for role, url in endpoints.items()}}


def check_manifest(old: dict, new: dict, run_id: str, model: str) -> None:
    """Refuse to resume a run with different settings, naming every difference."""
    diffs = manifest_differences(old, new)
    if diffs:
        # A new release of this tool changes the code hash (and may lay requests out anew): its
        # settings cannot be given back, but the run needs no new registration to go on.
        upgraded = any(d.startswith("code_hash:") for d in diffs)
        hint = (
            "\nIt was registered by another version of lexpilot-batch: `lexpilot-batch poll-and-advance --submit "
            "--wait` goes on with it as registered (its manifest keeps what it was registered with); a new --run-id "
            "starts it again with this version."
            if upgraded
            else "\nUse a new --run-id for a different experiment, or the original settings to resume."
        )
        raise ManifestMismatch(
            f"run {run_id!r} of model {model!r} exists with different settings:\n"
            + "\n".join(f"  - {d}" for d in diffs)
            + hint
        )


def check_registration(
    run_id: str,
    plan: RunPlan,
    manifest: dict,
    *,
    holder: tuple[str, str] | None,
    others: Iterable[Mapping[str, Any]],
    old: dict | None,
) -> None:
    """Every check a run's registration makes before anything is written, in one place: `prepare`
    (`register_run`, over the database) and `prepare --dry-run` (`estimate.state`, in memory) call
    it alike. `holder` is whoever holds the run's key, `others` the other runs' manifests, `old`
    this run's manifest when it is registered already."""
    check_key_free(run_id, plan.model, holder)
    check_readings(others, plan)
    if old is not None:
        check_manifest(old, manifest, run_id, plan.model)


def manifest_path(ws: Workspace, run_id: str, model: str) -> Path:
    return ws.runs_dir / slug(run_id) / slug(model) / "manifest.json"


def register_run(
    ws: Workspace,
    run_id: str,
    plan: RunPlan,
    dataset: DatasetFile,
    limit: int | None,
    templates: dict[str, str],
    speculate: bool,
) -> Run:
    """Create the run, or check that its manifest is unchanged; copy its cases into the workspace."""
    indices = selected_cases(len(dataset), limit)
    model = plan.model
    manifest = build_manifest(run_id, plan, dataset, indices, templates)
    key = run_key(run_id, model)
    with ws.store.transaction() as db:
        row = db.execute("SELECT pk, manifest FROM runs WHERE run_id = ? AND model = ?", (run_id, model)).fetchone()
        clash = db.execute("SELECT run_id, model FROM runs WHERE key = ?", (key,)).fetchone()
        others = db.execute("SELECT manifest FROM runs WHERE NOT (run_id = ? AND model = ?)", (run_id, model))
        old = None if row is None else json.loads(row["manifest"])
        if old is not None and old.get("dataset_sha256") != manifest["dataset_sha256"]:
            _refuse_changed_dataset(db, old, dataset, run_id, model)  # the file and its cases, not two hashes
        check_registration(
            run_id,
            plan,
            manifest,
            holder=None if clash is None else (clash["run_id"], clash["model"]),
            others=(json.loads(r["manifest"]) for r in others),
            old=old,
        )
        if old is not None:  # registered before: its row holds the manifest just checked
            set_speculate(db, row["pk"], speculate)
            run = Run(row["pk"], run_id, model, key, old)
        else:
            run = _insert_run(db, run_id, model, key, dataset, indices, manifest, templates, speculate)
    # Written after the commit, and again on every prepare: a kill in between is mended next time.
    write_manifest_file(ws, run)
    return run


def _refuse_changed_dataset(db: sqlite3.Connection, old: dict, dataset: DatasetFile, run_id: str, model: str) -> None:
    """The run was registered with another dataset: name the files (a Hub file's revisions too) and
    what changed between them."""
    from lexpilot_batch.study.dataset_memory import dataset_changes, registered_source

    before = registered_source(old)
    if isinstance(before, HubFile):
        commit = old.get("dataset_commit", "")
        what = f"{dataset.hub.label if dataset.hub else dataset.source} is not the dataset {before.url} (commit {commit[:12]})"
        restore = f"Pass --dataset {before.pinned(commit).url} (its revision then) to resume the run"
    else:
        label = dataset.hub.label if dataset.hub else str(dataset.path)
        same = before is not None and dataset.hub is None and before.resolve() == dataset.path.resolve()
        what = f"the file {label} changed since" if same else f"{label} is not the dataset {before or 'another file'}"
        restore = "Restore the file it was registered with to resume the run"
    raise ManifestMismatch(
        f"run {run_id!r} of model {model!r}: {what} the run was registered with it: "
        f"{dataset_changes(db, old['dataset_sha256'], dataset)}.\n"
        f"{restore}, or use a new --run-id for the changed dataset."
    )


def _insert_run(
    db: sqlite3.Connection,
    run_id: str,
    model: str,
    key: str,
    dataset: DatasetFile,
    indices: list[int],
    manifest: dict,
    templates: dict[str, str],
    speculate: bool,
) -> Run:
    """Insert the run and copy its cases (inside the caller's transaction)."""
    _copy_cases(db, dataset, len(indices))
    # The run is classed with its own mapping when it is scored (`results`): keep that mapping.
    keep_categories(
        db, dataset.categories_sha256, json.dumps(grouped(dataset.classes, dataset.class_names), ensure_ascii=False)
    )
    pk = insert_run(
        db,
        run_id,
        model,
        key,
        dataset.sha256,
        json.dumps(manifest, ensure_ascii=False),
        json.dumps(templates, ensure_ascii=False),
        speculate,
    )
    return Run(pk, run_id, model, key, manifest)


def _copy_cases(db: sqlite3.Connection, dataset: DatasetFile, n: int) -> None:
    """Copy the dataset's first `n` cases into the workspace, unless an earlier run already did.

    The cases are read from the file again, one at a time; a file changed since it was validated
    raises `DataError` and the caller's transaction copies nothing.
    """
    have = db.execute("SELECT COUNT(*) FROM cases WHERE dataset = ? AND idx < ?", (dataset.sha256, n)).fetchone()[0]
    if have == n:
        return
    copy_cases(
        db,
        (
            (dataset.sha256, i, case.case_id, dataset.case_classes[i], case.model_dump_json(), case.cause_of_action)
            for i, case in enumerate(dataset.read_cases(n))
        ),
    )


def write_manifest_file(ws: Workspace, run: Run) -> None:
    text = json.dumps(run.manifest, ensure_ascii=False, indent=2) + "\n"
    write_atomic(manifest_path(ws, run.run_id, run.model), text.encode("utf-8"))


def add_threads(ws: Workspace, run: Run, tasks: Iterable[str], dataset: DatasetFile) -> int:
    """Create the run's threads for these tasks (existing ones are kept); returns how many are new.

    The variants of each case come from `dataset`, which must have been opened for these tasks
    (`open_dataset(..., variants=protocol_variants(tasks))`).
    """
    rows = [(run.pk, task, i, variant) for task, i, variant in run_threads(run.manifest, tasks, dataset.variants)]
    with ws.store.transaction() as db:
        return insert_threads(db, rows)


def run_threads(
    manifest: Mapping[str, Any], tasks: Iterable[str], variants: Sequence[Mapping[str, tuple[str, ...]]]
) -> Iterator[tuple[str, int, str]]:
    """The threads `(task, case index, variant)` of the run with this manifest, for these tasks.

    A run has one thread per variant of each of its selected cases; `variants` holds, per case of
    its dataset, task -> variants (`DatasetFile.variants`).
    """
    n_cases = len(manifest["case_ids"])
    for task in tasks:
        for i, case_variants in enumerate(variants[:n_cases]):
            for variant in case_variants[task]:
                yield task, i, variant


def protocol_variants(tasks: Iterable[str]) -> dict[str, Callable[[Case], tuple[str, ...]]]:
    """Task -> how its protocol names the threads of a case: what `open_dataset` keeps per case."""
    return {task: PROTOCOLS[task].variants for task in tasks}


def load_runs(ws: Workspace) -> list[Run]:
    return [
        Run(r["pk"], r["run_id"], r["model"], r["key"], json.loads(r["manifest"]))
        for r in ws.store.conn.execute("SELECT pk, run_id, model, key, manifest FROM runs ORDER BY pk")
    ]
