"""A researcher's day (issue 29): what the commands say to someone who is not the author.

Each test reproduces one finding of the issue: a dataset a workspace remembers and a changed file
refused by what changed (item 3), and the small messages of item 7 (a JSON Lines dataset, a
literal brace in a prompt, a --limit above the dataset's size, an unmapped cause against the
bundled mapping, progress rates, compaction noise, where `run` leaves its results). Everything
runs in-process against the simulated provider.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from lexpilot_batch.cli import app
from lexpilot_batch.cli.output import pace
from lexpilot_batch.errors import LexpilotError
from lexpilot_batch.util import resources

runner = CliRunner()
PREPARE = ["prepare", "--stage", "lca", "--run-id", "r1", "--model", "sim-eval", "--provider", "simulated"]


def invoke(args: list[str], root: Path) -> Any:
    return runner.invoke(app, [*args, "--root", str(root)])


def refusal(result: Any) -> str:
    assert result.exit_code != 0
    assert isinstance(result.exception, LexpilotError), result.output
    return str(result.exception)


@pytest.fixture
def dataset(tmp_path: Path) -> Path:
    """The bundled sample's cases in a file of the user's own (other bytes: not the sample itself)."""
    path = tmp_path / "my-cases.json"
    cases = json.loads(resources.sample_dataset().read_text(encoding="utf-8"))
    path.write_text(json.dumps(cases, ensure_ascii=False, indent=1), encoding="utf-8")
    return path


def test_the_workspace_remembers_its_dataset_and_names_what_changed_in_it(tmp_path: Path, dataset: Path) -> None:
    root = tmp_path / "ws"
    first = invoke([*PREPARE, "--dataset", str(dataset)], root)
    assert first.exit_code == 0, first.output

    # Without --dataset a later prepare uses the remembered file (not the bundled sample) and says so.
    again = invoke([*PREPARE[:4], "r2", *PREPARE[5:]], root)
    assert again.exit_code == 0, again.output
    assert f"No --dataset given: using {dataset}" in again.output
    manifest = json.loads(next((root / "runs").glob("r2-*/*/manifest.json")).read_text(encoding="utf-8"))
    assert manifest["dataset_path"] == str(dataset) and not manifest["bundled_sample"]

    # The file edited: one case removed, one edited, one added; the refusal names the file and each.
    cases = json.loads(dataset.read_text(encoding="utf-8"))
    removed, edited = str(cases[1]["case_number"]), str(cases[2]["case_number"])
    cases[2]["cause_of_action"] = cases[3]["cause_of_action"]
    added = {**cases[4], "case_number": "NEW-1"}
    del cases[1]
    cases.append(added)
    dataset.write_text(json.dumps(cases, ensure_ascii=False), encoding="utf-8")
    message = refusal(invoke(PREPARE, root))
    assert f"the file {dataset} changed since the runs were registered" in message
    assert "1 case added (NEW-1)" in message
    assert f"1 case removed ({removed})" in message
    assert f"1 case edited ({edited})" in message
    assert "sha256" not in message.lower()  # the file and its cases, not two hashes


def test_a_changed_remembered_dataset_is_refused_for_a_new_run_id_too(tmp_path: Path, dataset: Path) -> None:
    """A new run id without --dataset started on the edited file unasked, and the report split the
    study in two by dataset; asked for with --dataset, the changed file starts new runs."""
    root = tmp_path / "ws"
    assert invoke([*PREPARE, "--dataset", str(dataset)], root).exit_code == 0
    cases = json.loads(dataset.read_text(encoding="utf-8"))
    cases[0]["cause_of_action"] = cases[1]["cause_of_action"]
    dataset.write_text(json.dumps(cases, ensure_ascii=False), encoding="utf-8")
    new_run = [*PREPARE[:4], "r2", *PREPARE[5:]]
    for command in (new_run, [*new_run, "--dry-run"]):
        message = refusal(invoke(command, root))
        assert f"the file {dataset} changed since the runs were registered" in message
        assert f"1 case edited ({cases[0]['case_number']})" in message and f"--dataset {dataset}" in message
    assert not list((root / "runs").glob("r2-*"))
    started = invoke([*new_run, "--dataset", str(dataset)], root)
    assert started.exit_code == 0, started.output


def test_prices_given_to_prepare_are_kept_for_status_report_and_run(tmp_path: Path) -> None:
    """`prepare --prices FILE` priced only its --dry-run: the file was ignored otherwise, and a later
    `status` or `report` showed n/a (or the bundled table) for the model it priced."""
    root, prices = tmp_path / "ws", tmp_path / "prices.json"
    prices.write_text(json.dumps({"sim-eval": {"input": 1000, "output": 2000}}), encoding="utf-8")
    prepared = invoke([*PREPARE, "--limit", "2", "--prices", str(prices)], root)
    assert prepared.exit_code == 0, prepared.output
    assert "--prices kept for this workspace" in prepared.output
    prices.unlink()  # kept whole: the file is no longer needed
    status = json.loads(invoke(["status", "--format", "json"], root).output)
    assert status["summary"]["models"]["sim-eval"]["projected_cost_usd"] > 0
    ran = invoke(["run", *PREPARE[1:], "--limit", "2", "--poll-interval", "0"], root)
    assert ran.exit_code == 0, ran.output
    usage = json.loads(invoke(["report", "--format", "json", "--bootstrap", "0"], root).output)["groups"][0]["usage"]
    eval_ = usage["roles"]["eval"]
    assert eval_["cost_usd"] == pytest.approx(
        (eval_["prompt_tokens"] * 1000 + eval_["completion_tokens"] * 2000) / 1e6 * 0.5
    )
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"sim-eval": {"input": 1, "output": 1}}), encoding="utf-8")
    given = json.loads(invoke(["report", "--format", "json", "--bootstrap", "0", "--prices", str(other)], root).output)
    assert given["groups"][0]["usage"]["roles"]["eval"]["cost_usd"] < eval_["cost_usd"]  # a given file wins


def test_with_a_limit_the_cases_never_copied_in_are_not_called_added(tmp_path: Path, dataset: Path) -> None:
    """Runs of `--limit 3` hold only the first three cases: an edit of another is a change that
    cannot be named, not the file's fifteen others "added"; an edit of a held one is named."""
    root = tmp_path / "ws"
    assert invoke([*PREPARE, "--dataset", str(dataset), "--limit", "3"], root).exit_code == 0
    cases = json.loads(dataset.read_text(encoding="utf-8"))
    cases[10]["complete_history"][0]["content"] += "（补充）"
    dataset.write_text(json.dumps(cases, ensure_ascii=False), encoding="utf-8")
    message = refusal(invoke([*PREPARE, "--limit", "3"], root))
    assert "cases added" not in message and "edited" not in message
    assert f"holds the file's first 3 cases, and it now has {len(cases)}: the {len(cases) - 3} after them" in message
    cases[1]["complete_history"][0]["content"] += "（补充）"
    dataset.write_text(json.dumps(cases, ensure_ascii=False), encoding="utf-8")
    message = refusal(invoke([*PREPARE, "--limit", "3"], root))
    assert f"1 case edited ({cases[1]['case_number']})" in message and "cases added" not in message


def test_a_json_lines_dataset_is_told_a_json_array_is_expected(tmp_path: Path) -> None:
    cases = json.loads(resources.sample_dataset().read_text(encoding="utf-8"))
    jsonl = tmp_path / "cases.jsonl"
    jsonl.write_text("\n".join(json.dumps(c, ensure_ascii=False) for c in cases[:3]) + "\n", encoding="utf-8")
    message = refusal(invoke([*PREPARE, "--dataset", str(jsonl)], tmp_path / "ws"))
    assert "looks like JSON Lines" in message and "one JSON array of case objects" in message


def test_a_literal_brace_in_a_prompt_is_told_to_be_doubled(tmp_path: Path) -> None:
    prompts = tmp_path / "prompts.json"
    prompts.write_text(json.dumps({"lca_classify": '{history}\n{response}\n输出 {"a":1}'}), encoding="utf-8")
    message = refusal(invoke([*PREPARE, "--prompts", str(prompts)], tmp_path / "ws"))
    assert "literal braces" in message and "must be doubled" in message and '{{"label": "judgment"}}' in message


def test_a_limit_above_the_dataset_size_says_all_cases_are_used(tmp_path: Path) -> None:
    n = len(json.loads(resources.sample_dataset().read_text(encoding="utf-8")))
    result = invoke([*PREPARE, "--limit", "1000"], tmp_path / "ws")
    assert result.exit_code == 0, result.output
    assert f"--limit 1000: the dataset has only {n} cases, so all are used." in result.output


def test_an_unmapped_cause_against_the_bundled_mapping_says_to_copy_it(tmp_path: Path) -> None:
    cases = json.loads(resources.sample_dataset().read_text(encoding="utf-8"))
    cases[0]["cause_of_action"] = "星际航行纠纷"
    path = tmp_path / "cases.json"
    path.write_text(json.dumps(cases, ensure_ascii=False), encoding="utf-8")
    message = refusal(invoke([*PREPARE, "--dataset", str(path)], tmp_path / "ws"))
    assert "copy the bundled mapping" in message and "--categories FILE" in message
    assert "add each to one of its classes (" not in message.split("copy the bundled mapping")[0]


@pytest.mark.parametrize(
    ("done", "total", "elapsed", "shown"),
    [
        (0, 40, 3.0, "3s in flight, no request finished yet"),
        (10, 40, 20.0, "20s in flight, 30.0 req/min, ~1m00s left"),
        (30, 40, 2.0, "2s in flight, 15.0 req/s, ~1s left"),
        (40, 40, 75.0, "1m15s in flight, all finished"),
    ],
)
def test_progress_reads_the_rate_against_the_batches_age(done: int, total: int, elapsed: float, shown: str) -> None:
    """The bar showed tqdm's rate, the provider's jumping counts over the moments between two
    polls (`3973551.16req/s`); now the rate is over the batches' own age, with what is left."""
    assert pace(done, total, elapsed) == shown


def test_run_is_quiet_about_compaction_and_ends_with_where_the_results_are(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    args = ["run", "--stage", "lca", "--run-id", "r1", "--model", "sim-eval", "--provider", "simulated", "--limit", "2"]
    quiet = invoke(args, root)
    assert quiet.exit_code == 0, quiet.output
    assert "Compacted" not in quiet.output
    assert f"Results are kept in {root.resolve() / 'state'}" in quiet.output
    for command in ("report --format html --out report.html", "export --layout cases --out results"):
        assert command in quiet.output
    assert "req/s]" not in quiet.output and "it/s" not in quiet.output

    verbose = invoke([*args[:4], "r2", *args[5:], "--verbose"], root)
    assert verbose.exit_code == 0, verbose.output
    assert "Compacted" in verbose.output


def test_run_refuses_a_report_format_before_anything_is_sent(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    result = runner.invoke(app, ["run", *PREPARE[1:], "--report-format", "pdf", "--root", str(root)])
    assert "--report-format must be one of table, json" in refusal(result)
    assert not root.exists()  # (it used to run every wave, then refuse the report)


def test_a_fault_spec_with_a_typo_is_refused_before_anything_is_registered(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    assert "unknown key 'bogus'" in refusal(invoke([*PREPARE, "--sim-faults", "bogus=1"], root))
    assert not root.exists()


def test_status_of_a_run_id_the_workspace_does_not_have_says_so(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    assert invoke(PREPARE, root).exit_code == 0
    message = refusal(runner.invoke(app, ["status", "--run-id", "nope", "--root", str(root)]))
    assert message == "--run-id nope: no such run in this workspace; it has r1"
    assert "no such run" in refusal(runner.invoke(app, ["status", "--model", "nope", "--root", str(root)]))


def test_an_estimate_of_a_finished_workspace_does_not_say_prices_are_missing(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    assert runner.invoke(app, ["run", *PREPARE[1:], "--root", str(root)]).exit_code == 0
    result = runner.invoke(app, ["status", "--estimate", "--root", str(root)])
    assert result.exit_code == 0, result.output
    assert "Nothing is due" in result.output and "no price for these models" not in result.output


def test_a_ctrl_c_while_the_modules_load_ends_as_an_interrupt(monkeypatch, capsys) -> None:
    import builtins

    import lexpilot_batch.cli as cli

    real_import = builtins.__import__

    def interrupted(name, *args, **kwargs):
        if name == "lexpilot_batch.cli.application":
            raise KeyboardInterrupt
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", interrupted)
    with pytest.raises(SystemExit) as stopped:
        cli.main()
    assert stopped.value.code == 130
    assert capsys.readouterr().err.strip() == "Interrupted; run the same command again to resume."


def test_a_provider_without_a_batch_api_is_rehearsed_through_its_synchronous_calls(tmp_path: Path) -> None:
    """`deepseek/` has no Batch API: its real run sends each request at once at list price, and so
    does its rehearsal (it was rehearsed as batches, at batch price and with batch round trips)."""
    from lexpilot_batch.state.workspace import Workspace

    root = tmp_path / "ws"
    models = ["--model", "deepseek/deepseek-chat", "--user-model", "deepseek/deepseek-chat"]
    models += ["--judge-model", "deepseek/deepseek-chat"]
    args = ["prepare", "--stage", "lca", "--run-id", "r1", "--provider", "simulated", *models]
    dry = runner.invoke(app, [*args, "--dry-run", "--root", str(root)])
    assert dry.exit_code == 0, dry.output
    assert "eval  sync" in dry.output and "Batch round trips, expected path: 0" in dry.output
    done = runner.invoke(app, ["run", *args[1:], "--root", str(root)])
    assert done.exit_code == 0, done.output
    with Workspace(root, writable=False) as ws:
        backends = {r[0] for r in ws.store.conn.execute("SELECT backend FROM files")}
        endpoints = {r[0] for r in ws.store.conn.execute("SELECT endpoint FROM files")}
    assert backends == {"sync"} and endpoints == {"simulated"}


def test_a_fault_spec_is_only_checked_where_the_simulator_is_used(monkeypatch) -> None:
    """LEXPILOT_SIM_FAULTS left set in a shell must not stop a real run's commands."""
    from lexpilot_batch.engine.session import ProviderOptions, Session

    Session(None, ProviderOptions(sim_faults="bogus")).close()
    with pytest.raises(LexpilotError, match="bogus"):
        Session(None, ProviderOptions(provider="simulated", sim_faults="bogus"))


def _own_categories(tmp_path: Path, dataset: Path) -> Path:
    """A categories file of the user's own, mapping a cause the bundled one lacks, which the dataset uses."""
    categories = json.loads(resources.default_categories().read_text(encoding="utf-8"))
    first = next(k for k in categories if not k.startswith("$"))
    categories[first] = [*categories[first], "自拟案由"]
    path = tmp_path / "my-categories.json"
    path.write_text(json.dumps(categories, ensure_ascii=False), encoding="utf-8")
    cases = json.loads(dataset.read_text(encoding="utf-8"))
    cases[0]["cause_of_action"] = "自拟案由"
    dataset.write_text(json.dumps(cases, ensure_ascii=False), encoding="utf-8")
    return path


def test_a_later_prepare_uses_the_recorded_categories_and_role_models_and_says_so(
    tmp_path: Path, dataset: Path
) -> None:
    """Issue 48, point 2: a second `prepare` without --categories failed blaming the bundled mapping,
    and with it, the role models had silently gone back to the defaults (a settings diff)."""
    root, categories = tmp_path / "ws", _own_categories(tmp_path, dataset)
    roles = ["--user-model", "sim-user", "--judge-model", "sim-judge"]
    first = invoke([*PREPARE, "--dataset", str(dataset), "--categories", str(categories), *roles], root)
    assert first.exit_code == 0, first.output

    for run_id in ("r1", "r2"):  # the same run resumed, and a new one
        again = invoke([*PREPARE[:4], run_id, *PREPARE[5:]], root)
        assert again.exit_code == 0, again.output
        assert f"No --categories given: using {categories}" in again.output
        assert "No --user-model given: using sim-user" in again.output
        assert "No --judge-model given: using sim-judge" in again.output
    manifest = json.loads(next((root / "runs").glob("r2-*/*/manifest.json")).read_text(encoding="utf-8"))
    assert (manifest["user_model"], manifest["judge_model"]) == ("sim-user", "sim-judge")
    assert manifest["categories_path"] == str(categories)
    dry = invoke([*PREPARE[:4], "r3", *PREPARE[5:], "--dry-run"], root)
    assert dry.exit_code == 0, dry.output

    # Given, a role model wins; the bundled mapping given by name is refused naming the recorded file.
    other = invoke([*PREPARE[:4], "r4", *PREPARE[5:], "--judge-model", "sim-judge-2"], root)
    assert other.exit_code == 0 and "No --judge-model given" not in other.output, other.output
    message = refusal(invoke([*PREPARE, "--categories", str(resources.default_categories())], root))
    assert "does not cover" in message
    assert f"registered with the categories file {categories}: pass --categories {categories}" in message

    # The recorded file gone: refused, naming it.
    categories.unlink()
    message = refusal(invoke(PREPARE, root))
    assert f"the categories file this workspace's runs were registered with, {categories}, is not there" in message


STUDY = [
    *("--model", "dashscope/qwen-plus", "--model", "deepseek/deepseek-chat"),
    *("--model", "zhipu/glm-4-plus", "--model", "openai/gpt-4o-mini"),
    *("--user-model", "deepseek/deepseek-chat", "--judge-model", "dashscope/deepseek-r1"),
]


def test_a_misspelt_model_in_prices_is_refused_at_prepare_and_status_before_anything_is_sent(tmp_path: Path) -> None:
    """Issue 48, point 3: a typo in --prices was ignored by prepare --dry-run and status, and only
    report warned, after the money was spent."""
    root, prices = tmp_path / "ws", tmp_path / "prices.json"
    prices.write_text(json.dumps({"openai/gpt-4o-mnii": {"input": 1, "output": 2}}), encoding="utf-8")
    prepare = [*PREPARE[:6], "openai/gpt-4o-mini", *PREPARE[7:], "--limit", "1"]
    for command in ([*prepare, "--prices", str(prices)], [*prepare, "--prices", str(prices), "--dry-run"]):
        message = refusal(invoke(command, root))
        assert "'openai/gpt-4o-mnii' prices no model of this study (did you mean 'openai/gpt-4o-mini'?)" in message
    assert not (root / "requests").exists()
    assert invoke(prepare, root).exit_code == 0
    message = refusal(invoke(["status", "--prices", str(prices)], root))
    assert "did you mean 'openai/gpt-4o-mini'?" in message and "run status again" in message
    # A name far from every model of the study (a shared price file's other entries) is no typo.
    prices.write_text(json.dumps({"mistral/mistral-small-latest": {"input": 1, "output": 2}}), encoding="utf-8")
    assert invoke(["status", "--prices", str(prices)], root).exit_code == 0


def test_a_study_of_chinese_platforms_and_openai_shows_a_total_naming_what_is_unpriced(tmp_path: Path) -> None:
    """Issue 48, point 3: the bundled table priced only OpenAI, Anthropic and Gemini, so one
    DashScope judge turned the whole study's total into n/a. The platforms the README names are
    priced from dated sources; what no price covers is named beside a partial total."""
    root = tmp_path / "ws"
    ran = invoke(
        ["run", *PREPARE[1:5], *STUDY, "--provider", "simulated", "--limit", "1", "--poll-interval", "0"], root
    )
    assert ran.exit_code == 0, ran.output
    status = invoke(["status"], root).output
    total = next(line for line in status.splitlines() if line.lstrip().startswith("total"))
    assert "n/a" not in total and "$" in total and "+" in total
    assert "the total leaves out dashscope/deepseek-r1, which no price covers" in status
    summary = json.loads(invoke(["status", "--format", "json"], root).output)["summary"]["models"]
    priced = {m for m, e in summary.items() if e["cost_usd"] is not None}
    assert priced == {"dashscope/qwen-plus", "deepseek/deepseek-chat", "zhipu/glm-4-plus", "openai/gpt-4o-mini"}
    # The price is the table's, at the batch discount: tokens x list price / 1M x 0.5.
    qwen = summary["dashscope/qwen-plus"]
    expected = (qwen["prompt_tokens"] * 0.4 + qwen["completion_tokens"] * 1.2) / 1e6 * 0.5
    assert qwen["cost_usd"] == pytest.approx(expected)


def test_status_says_how_long_the_study_has_left_from_the_measured_batch_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 48, point 3: nothing said how long a study had left. Simulated batches are never
    measured (`state.queries.measured_batch_seconds`): a measured 10 minutes stands in."""
    import lexpilot_batch.status.summary as summary

    root = tmp_path / "ws"
    assert invoke([*PREPARE, "--limit", "2"], root).exit_code == 0
    assert "Time left" not in invoke(["status"], root).output  # nothing measured yet: nothing claimed
    monkeypatch.setattr(summary, "measured_batch_seconds", lambda db: 600.0)
    data = json.loads(invoke(["status", "--format", "json"], root).output)
    waves = data["summary"]["time_left_s"]
    assert waves is not None and waves[0] >= 600 and waves[1] >= waves[0] and waves[0] % 600 == 0
    assert "Time left: about" in invoke(["status"], root).output


def test_a_report_for_a_model_not_there_lists_the_runs_and_models_there_are(tmp_path: Path) -> None:
    """Issue 48, point 8: `report --model gpt-4o-mini` (no prefix) said "no run matching" without
    naming the models the workspace has."""
    root = tmp_path / "ws"
    assert invoke([*PREPARE[:6], "openai/gpt-4o-mini", *PREPARE[7:], "--limit", "1"], root).exit_code == 0
    message = refusal(invoke(["report", "--model", "gpt-4o-mini", "--partial"], root))
    assert "no run matching model 'gpt-4o-mini'" in message and "it has r1 of openai/gpt-4o-mini" in message


def test_a_root_given_with_a_tilde_is_the_home_folders_and_prepare_prints_where(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 48, point 8: `--root '~/study'` (quoted, or on Windows) made a folder named `~`, and
    `prepare` printed only paths relative to a root it did not name."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("USERPROFILE", str(home))
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(app, [*PREPARE, "--limit", "1", "--root", "~/study"])
    assert result.exit_code == 0, result.output
    assert (home / "study" / "state").is_dir() and not (tmp_path / "~").exists()
    assert f"file(s) under {(home / 'study').resolve()}:" in result.output


def test_prepare_says_when_a_reasoning_judge_takes_no_temperature(tmp_path: Path) -> None:
    """Issue 48, point 8: the judge temperature was dropped for a reasoning judge without a word
    at `prepare`, though a paper must report it. OpenAI's reasoning models refuse `temperature`
    other than 1 (https://platform.openai.com/docs/guides/reasoning)."""
    root = tmp_path / "ws"
    said = invoke([*PREPARE, "--limit", "1", "--judge-model", "openai/o4-mini"], root)
    assert said.exit_code == 0, said.output
    assert "openai/o4-mini (judge role) does not take --judge-temperature 0.1: not sent" in said.output
    manifest = json.loads(next((root / "runs").glob("r1-*/*/manifest.json")).read_text(encoding="utf-8"))
    assert "temperature" in manifest["requests"]["judge"]["not_applied"]
    plain = invoke([*PREPARE[:4], "r2", *PREPARE[5:], "--limit", "1", "--judge-model", "sim-judge"], root)
    assert plain.exit_code == 0 and "does not take" not in plain.output, plain.output


def test_run_resumed_while_a_wave_is_in_flight_does_not_tell_you_to_poll(tmp_path: Path) -> None:
    """Issue 48, point 8: on a rerun after an interrupt `run` said "run poll-and-advance" and then
    polled by itself."""
    root = tmp_path / "ws"
    assert invoke([*PREPARE, "--limit", "1"], root).exit_code == 0
    assert invoke(["submit", "--provider", "simulated", "--sim-faults", "latency=0.5"], root).exit_code == 0
    ran = invoke(["run", *PREPARE[1:], "--limit", "1", "--poll-interval", "0"], root)
    assert ran.exit_code == 0, ran.output
    assert "A wave is under way; new work joins the next wave." in ran.output
    assert "(run poll-and-advance)" not in ran.output
