"""`export --format inspect`: one Inspect log per finished (run, model, task), for `inspect view`
and every tool that reads Inspect logs (inspect_ai's `read_eval_log`, lighteval, log dashboards).

The logs are written through inspect_ai's own API (`inspect_ai.log`: `EvalLog`, `EvalSample`,
`write_eval_log`, the optional extra `inspect`), not as hand-made JSON: the format is versioned
but no frozen spec, and the library writes whatever its viewer reads. Each log,
`<run>_<model>_<task>.eval` under the output folder (`<run>` and `<model>` as the seed layout
names their folders, `state.workspace.seed_name`), holds:

| Inspect | what |
| --- | --- |
| `eval` | task `lexpilot/<task>`, the evaluated model, the User Model and the judge as `model_roles`, each with its generation settings; the dataset (its file or `hf://` URL, sample ids); the run's manifest as `metadata.manifest` |
| `plan` | the task's steps, as its requests were named, and the evaluated model's generation settings |
| a sample per finished thread | id: the case number (`/c`, `/u` after it for LCA's two histories); `input`: the history the thread starts from; `messages`: that history, then every new turn of the evaluated model and every User Model reply, in order; `output`: the last new response; `target`: LCA the label the history calls for, DCG the focal points, LJP each claim's gold verdict |
| its score, named for the task | `value`: LCA `correct`; DCG `success` and each round's; LJP `correct`, `claims_correct`, `claims`; `answer`: the label, decisions or predicted verdicts; `explanation`: every judge call's raw output; `metadata`: every judge call (step, attempt, status, raw output, decision, error) and the outcome `export --layout cases` writes |
| its `model_usage`, `role_usage` | tokens (input less cached and cache-written, as Inspect counts them) and cost (`providers.prices.cost_usd`) of every request the sample owns: its thread's, each counted once, a step two tasks read (Interaction LJP's round 1 is LCA's underspecified turn) in the first task of the run that reads it |
| `results` | the run's metrics of the task (`tasks.Task.score`), overall and per cause class (`group`: the metric, `name`: the class); a metric undefined (QWK with no expected disagreement) is left out and named in the score's `metadata.undefined` |
| `stats` | the samples' usage summed; the run's registration time |

A log of a task that is not finished has status `started` (written with `--partial` only).
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from lexpilot_batch import __version__
from lexpilot_batch.benchmark.protocols import PROTOCOLS
from lexpilot_batch.benchmark.protocols.dcg import ON_TARGET
from lexpilot_batch.benchmark.protocols.lca import VARIANTS
from lexpilot_batch.benchmark.tasks import TASK_ORDER, TASKS
from lexpilot_batch.data import Case, stored_case
from lexpilot_batch.errors import ConfigError, LexpilotError
from lexpilot_batch.providers.prices import DEFAULT_BATCH_DISCOUNT, Prices, cost_usd, price_for
from lexpilot_batch.providers.prices import total as total_cost
from lexpilot_batch.report import results
from lexpilot_batch.report.document import RunResults, TaskRecords
from lexpilot_batch.state.states import RequestState
from lexpilot_batch.state.workspace import Workspace, seed_name
from lexpilot_batch.study.price_memory import prices_for
from lexpilot_batch.util.extras import require
from lexpilot_batch.util.fileio import cannot_write

# The label LCA expects after each history: a question after the underspecified one.
EXPECTED_LABEL = {"complete": "judgment", "underspecified": "clarification"}


@dataclass
class ExportedLogs:
    files: list[Path] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    runs: list[RunResults] = field(default_factory=list)  # the runs exported


@dataclass(frozen=True)
class Call:
    """One request of a case as the workspace holds it."""

    step: str
    attempt: int
    role: str
    model: str
    status: str
    text: str | None
    raw: str | None  # a judge's whole output, malformed or not (`state.judge_words`)
    reasoning: str | None  # and its reasoning, where the API returned it apart
    value: Any
    error: str | None
    prompt_tokens: int
    completion_tokens: int
    reasoning_tokens: int
    cached_tokens: int
    cache_write_tokens: int
    backend: str
    submitted_at: float | None  # when its file was sent, and when its answers came back
    finished_at: float | None


def export_inspect(
    ws: Workspace,
    out_dir: Path,
    run_id: str | None = None,
    model: str | None = None,
    *,
    partial: bool = False,
    prices: Prices | None = None,
    batch_discount: float = DEFAULT_BATCH_DISCOUNT,
) -> ExportedLogs:
    """Write one Inspect log per (run, model, task) of the workspace under `out_dir`.

    Unfinished or failed threads are refused as `report` refuses them, unless `partial`. Prices
    are those given, else the workspace's, else the bundled table's (`price_memory.prices_for`).
    """
    log_api = require("inspect_ai.log", "inspect", "Inspect logs (export --format inspect)", ConfigError)
    runs = results.load_run_results(ws, run_id, model)
    if not partial:
        results.check_complete(runs, "export the finished threads", ws.given_root)
    prices = prices_for(ws, dict(prices) if prices is not None else None)
    exported = ExportedLogs(runs=runs)
    for run in runs:
        source = _RunSource(ws.store.conn, run)
        for task in (t for t in TASK_ORDER if t in run.tasks):
            log = _Log(log_api, run, source, task, prices, batch_discount).build()
            name = f"{seed_name(run.run_id)}_{seed_name(run.model)}_{task}.eval"
            exported.files.append(_write(log_api, log, Path(out_dir) / name, out_dir))
            if log.status != "success":
                exported.notes.append(f"{run.run_id} / {run.model} / {task}: partial, its log's status is 'started'")
    return exported


def _write(log_api: Any, log: Any, path: Path, out_dir: Path) -> Path:
    """Written whole or not at all: to a name beside it, then renamed over it."""
    part = path.with_name(path.name + ".tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        log_api.write_eval_log(log, str(part), format="eval")
        os.replace(part, path)
    except OSError as exc:
        raise LexpilotError(cannot_write(path, exc, f"check that --out {out_dir} is a writable folder")) from None
    return path


class _RunSource:
    """What the logs of one run read beside its records: its manifest, its cases, its requests."""

    def __init__(self, db: sqlite3.Connection, run: RunResults) -> None:
        row = db.execute(
            "SELECT pk, dataset, manifest FROM runs WHERE run_id = ? AND model = ?", (run.run_id, run.model)
        ).fetchone()
        self.manifest: dict[str, Any] = json.loads(row["manifest"])
        self.cases: dict[str, tuple[int, Case]] = {
            number: (idx, stored_case(data))
            for idx, number, data in db.execute(
                "SELECT idx, case_number, data FROM cases WHERE dataset = ?", (row["dataset"],)
            )
        }
        self.calls: dict[int, list[Call]] = defaultdict(list)
        for r in db.execute(
            "SELECT q.case_idx, q.step, q.attempt, q.role, q.model, q.status, q.text, q.value, q.error,"
            " q.prompt_tokens, q.completion_tokens, q.reasoning_tokens, q.cached_tokens, q.cache_write_tokens,"
            " f.backend, f.submitted_at, f.finished_at, w.raw, w.reasoning FROM requests q"
            " JOIN files f ON f.pk = q.file_pk LEFT JOIN judge_words w ON w.request_pk = q.pk"
            f" WHERE q.run_pk = ? AND q.status != '{RequestState.PENDING}' ORDER BY q.case_idx, q.pk",
            (row["pk"],),
        ):
            self.calls[r["case_idx"]].append(
                Call(
                    step=r["step"],
                    attempt=r["attempt"],
                    role=r["role"],
                    model=r["model"],
                    status=r["status"],
                    text=r["text"],
                    raw=r["raw"],
                    reasoning=r["reasoning"],
                    value=json.loads(r["value"]) if r["value"] is not None else None,
                    error=r["error"],
                    prompt_tokens=r["prompt_tokens"] or 0,
                    completion_tokens=r["completion_tokens"] or 0,
                    reasoning_tokens=r["reasoning_tokens"] or 0,
                    cached_tokens=r["cached_tokens"] or 0,
                    cache_write_tokens=r["cache_write_tokens"] or 0,
                    backend=r["backend"],
                    submitted_at=r["submitted_at"],
                    finished_at=r["finished_at"],
                )
            )
        # Each step is owned by the first task of the run that reads it: counted once, there.
        self.tasks = [t for t in TASK_ORDER if t in run.tasks]

    def owner(self, step: str, case: Case) -> str | None:
        for task in self.tasks:
            protocol = PROTOCOLS[task]
            if any(step.startswith(p) for v in protocol.variants(case) for p in protocol.reads(v)):
                return task
        return None


@dataclass
class _Usage:
    """Tokens and cost of some requests of one model, or of one role."""

    prompt: int = 0
    completion: int = 0
    reasoning: int = 0
    cached: int = 0
    written: int = 0
    costs: list[float | None] = field(default_factory=list)

    def add(self, other: _Usage) -> None:
        for name in ("prompt", "completion", "reasoning", "cached", "written"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.costs += other.costs

    def model_usage(self, inspect_model: Any) -> Any:
        # Inspect counts input tokens without those read from or written to a cache (its OpenAI reader).
        return inspect_model.ModelUsage(
            input_tokens=max(self.prompt - self.cached - self.written, 0),
            output_tokens=self.completion,
            total_tokens=self.prompt + self.completion,
            input_tokens_cache_read=self.cached or None,
            input_tokens_cache_write=self.written or None,
            reasoning_tokens=self.reasoning or None,
            total_cost=total_cost(self.costs),
        )


class _Log:
    """The Inspect log of one task of one run."""

    def __init__(
        self, log_api: Any, run: RunResults, source: _RunSource, task: str, prices: Prices | None, discount: float
    ) -> None:
        import inspect_ai.model
        import inspect_ai.scorer

        self.log_api, self.model_api, self.scorer_api = log_api, inspect_ai.model, inspect_ai.scorer
        self.run, self.source, self.task, self.entry = run, source, task, run.tasks[task]
        self.settings: dict[str, Any] = source.manifest.get("settings", {})
        self.model_of = {"eval": run.model, "user": run.user_model, "judge": run.judge_model}
        self.prices, self.discount = prices, discount
        self.by_model: dict[str, _Usage] = defaultdict(_Usage)
        self.by_role: dict[str, _Usage] = defaultdict(_Usage)
        self.steps: dict[str, Call] = {}  # every step the samples read, in the order first met
        self.times: list[float] = []

    def build(self) -> Any:
        log = self.log_api
        samples = [self._sample(cls, record, number) for (cls, record), number in _pairs(self.entry)]
        manifest, settings, endpoints = self.source.manifest, self.settings, self.source.manifest.get("endpoints", {})
        created = manifest.get("created_at") or _iso(min(self.times, default=0.0))
        generate = self.model_api.GenerateConfig
        spec = log.EvalSpec(
            eval_id=_id(self.run.run_id, self.run.model, self.task),
            run_id=_id(self.run.run_id, self.run.model),
            created=created,
            task=f"lexpilot/{self.task}",
            task_id=_id(self.run.run_id, self.run.model, self.task, "task"),
            task_display_name=f"LexPilot {TASKS[self.task].title}",
            tags=["lexpilot", self.run.run_id],
            dataset=log.EvalDataset(
                name="LexPilot",
                location=manifest.get("dataset_path"),
                samples=len(samples),
                sample_ids=[s.id for s in samples],
            ),
            model=self.run.model,
            model_generate_config=generate(
                temperature=settings.get("temperature"), max_tokens=settings.get("max_tokens")
            ),
            model_base_url=endpoints.get("eval"),
            model_roles={
                "user": self.model_api.ModelConfig(
                    model=self.run.user_model,
                    config=generate(temperature=settings.get("temperature"), max_tokens=settings.get("max_tokens")),
                    base_url=endpoints.get("user"),
                ),
                "judge": self.model_api.ModelConfig(
                    model=self.run.judge_model,
                    config=generate(
                        temperature=settings.get("judge_temperature"), max_tokens=settings.get("max_tokens")
                    ),
                    base_url=endpoints.get("judge"),
                ),
            },
            config=log.EvalConfig(epochs=1),
            packages={"lexpilot-batch": __version__},
            metadata={
                "run_id": self.run.run_id,
                "group_key": self.run.group_key,
                "bundled_sample": self.run.bundled_sample,
                "manifest": manifest,
            },
        )
        plan = log.EvalPlan(
            name="lexpilot",
            steps=[
                log.EvalPlanStep(solver=step, params={"role": c.role, "model": self.model_of.get(c.role, c.model)})
                for step, c in self.steps.items()
            ],
            config=generate(temperature=settings.get("temperature"), max_tokens=settings.get("max_tokens")),
        )
        complete = not self.entry.missing and not self.entry.failed
        return log.EvalLog(
            version=2,
            status="success" if complete else "started",
            eval=spec,
            plan=plan,
            results=self._results(samples),
            stats=log.EvalStats(
                started_at=created,
                completed_at=_iso(max(self.times)) if complete and self.times else "",
                model_usage={m: u.model_usage(self.model_api) for m, u in self.by_model.items()},
                role_usage={r: u.model_usage(self.model_api) for r, u in self.by_role.items()},
            ),
            samples=samples,
        )

    def _sample(self, cls: str, record: dict[str, Any], number: str) -> Any:
        m = self.model_api
        idx, case = self.source.cases[number]
        variant = record["history_type"][0] if self.task == "lca" else ""
        reads = PROTOCOLS[self.task].reads(variant)
        calls = [c for c in self.source.calls[idx] if c.step.startswith(reads)]
        for c in calls:
            self.steps.setdefault(c.step, c)
        history = [_message(m, msg, "input") for msg in record["history"]]
        generated = [_message(m, msg, "generate", self.model_of) for msg in _new_turns(self.task, record)]
        last = next((msg.text for msg in reversed(generated) if msg.role == "assistant"), "")
        usage_by_model, usage_by_role = self._usage([c for c in calls if self.source.owner(c.step, case) == self.task])
        times = [t for c in calls for t in (c.submitted_at, c.finished_at) if t is not None]
        self.times += times
        sample_id = f"{number}/{variant}" if variant else number
        metadata: dict[str, Any] = {"case_number": number, "cause_class": cls, "cause_of_action": case.cause_of_action}
        if variant:
            metadata["history_type"] = VARIANTS[variant]
        if "stop_reason" in record:
            metadata["stop_reason"] = record["stop_reason"]
        return self.log_api.EvalSample(
            id=sample_id,
            epoch=1,
            input=history,
            target=_target(self.task, record, case),
            messages=[*history, *generated],
            output=m.ModelOutput.from_content(model=self.run.model, content=last),
            scores={self.task: self._score(record, [c for c in calls if c.role == "judge"])},
            metadata=metadata,
            model_usage={name: u.model_usage(m) for name, u in usage_by_model.items()},
            role_usage={role: u.model_usage(m) for role, u in usage_by_role.items()},
            started_at=_iso(min(times)) if times else None,
            completed_at=_iso(max(times)) if times else None,
            total_time=round(max(times) - min(times), 3) if times else None,
            uuid=_id(self.run.run_id, self.run.model, self.task, sample_id),
        )

    def _score(self, record: dict[str, Any], judge_calls: list[Call]) -> Any:
        outcome = TASKS[self.task].outcome(record)
        if self.task == "lca":
            value: dict[str, int] = {"correct": int(outcome["correct"])}
            answer = record["label"]
        elif self.task == "dcg":
            decisions = outcome["decisions"]
            value = {"success": int(outcome["success"])}
            value |= {f"round_{k}": int(d == ON_TARGET) for k, d in enumerate(decisions, 1)}
            answer = " / ".join(decisions)
        else:
            value = {k: int(outcome[k]) for k in ("correct", "claims_correct", "claims")}
            answer = " / ".join(outcome["predicted"])
        explanation = "\n\n".join(
            f"{c.step} (attempt {c.attempt}, {c.status}{': ' + c.error if c.error else ''}):\n"
            f"{c.raw if c.raw is not None else c.text if c.text is not None else ''}"
            for c in judge_calls
        )
        judge = [
            {
                "step": c.step,
                "attempt": c.attempt,
                "status": c.status,
                "model": self.model_of["judge"],
                "output": c.raw if c.raw is not None else c.text,
                "reasoning": c.reasoning,
                "decision": c.value,
                "error": c.error,
            }
            for c in judge_calls
        ]
        return self.scorer_api.Score(
            value=value, answer=answer, explanation=explanation, metadata={"judge": judge, "outcome": outcome}
        )

    def _usage(self, calls: Iterable[Call]) -> tuple[dict[str, _Usage], dict[str, _Usage]]:
        by_model: dict[str, _Usage] = defaultdict(_Usage)
        by_role: dict[str, _Usage] = defaultdict(_Usage)
        for c in calls:
            model = self.model_of.get(c.role, c.model)
            price = price_for(self.prices, c.role, model)
            cost = cost_usd(
                c.prompt_tokens,
                c.completion_tokens,
                price,
                c.backend,
                self.discount,
                c.cached_tokens,
                c.cache_write_tokens,
            )
            one = _Usage(
                c.prompt_tokens, c.completion_tokens, c.reasoning_tokens, c.cached_tokens, c.cache_write_tokens, [cost]
            )
            for into in (by_model[model], by_role[c.role], self.by_model[model], self.by_role[c.role]):
                into.add(one)
        return by_model, by_role

    def _results(self, samples: list[Any]) -> Any:
        log, task = self.log_api, TASKS[self.task]
        records = [record for _, record in self.entry.records]
        metrics: dict[str, Any] = {}
        undefined: list[str] = []
        for name, value in task.score(records).items():
            if value is None:
                undefined.append(name)
            else:
                metrics[name] = log.EvalMetric(name=name, value=value)
        by_class: dict[str, list[dict[str, Any]]] = {}
        for cls, record in self.entry.records:
            by_class.setdefault(cls, []).append(record)
        for cls, of_class in by_class.items():
            for name, value in task.score(of_class).items():
                if value is None:
                    undefined.append(f"{name}/{cls}")
                else:
                    metrics[f"{name}_{cls}"] = log.EvalMetric(name=cls, group=name, value=value)
        unscored = len(self.entry.missing) + len(self.entry.failed)
        score = log.EvalScore(
            name=self.task,
            scorer=self.task,
            scored_samples=len(samples),
            unscored_samples=unscored,
            metrics=metrics,
            metadata={"unit": task.unit, "n": task.size(task.total(records)), "undefined": undefined},
        )
        return log.EvalResults(total_samples=len(samples) + unscored, completed_samples=len(samples), scores=[score])


def _pairs(entry: TaskRecords) -> Iterable[tuple[tuple[str, dict[str, Any]], str]]:
    return zip(entry.records, entry.cases, strict=True)


def _new_turns(task: str, record: Mapping[str, Any]) -> list[dict[str, str]]:
    """The turns a thread added after its history, as messages: every new response of the evaluated
    model and every User Model reply, in order."""
    if task == "dcg":
        turns = []
        for r in record["rounds"]:
            turns.append({"role": "assistant", "content": r["question"]})
            if "reply" in r:
                turns.append({"role": "user", "content": r["reply"]})
        return turns
    if task == "ljp_interaction":
        return list(record["continued_history"][len(record["history"]) :])
    return [{"role": "assistant", "content": record["response"]}]


def _message(m: Any, msg: Mapping[str, str], source: str, model_of: Mapping[str, str] | None = None) -> Any:
    if msg["role"] == "assistant":
        model = model_of["eval"] if model_of is not None else None
        return m.ChatMessageAssistant(content=msg["content"], source=source, model=model)
    metadata = {"from": "User Model", "model": model_of["user"]} if model_of is not None else None
    return m.ChatMessageUser(content=msg["content"], source=source, metadata=metadata)


def _target(task: str, record: Mapping[str, Any], case: Case) -> str | list[str]:
    if task == "lca":
        return EXPECTED_LABEL[record["history_type"]]
    if task == "dcg":
        return list(case.focal_points)
    return [f"{c['claim']}: {c['gold']}" for c in record["claims"]]


def _id(*parts: str) -> str:
    """A stable id: the same run exported again gives the same ids."""
    return hashlib.sha256("\0".join(parts).encode("utf-8")).hexdigest()[:22]


def _iso(timestamp: float) -> str:
    return datetime.fromtimestamp(timestamp, timezone.utc).isoformat()
