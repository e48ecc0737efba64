"""No decision rests on comparing our clock with the provider's (issue 44, item 3).

A lost create (its batch made, its answer never arrived) with the client's clock 5 minutes and 2
hours ahead of the provider's, and with the clock set right (2 hours back) between the create and
the command that looks for its batch, on the three shapes of lookup: OpenAI's (a tagged batch; a
listed upload, whose answer is lost too), Anthropic's (untagged, told by its size and time) and
Together's (untagged, told by its upload). Each study ends with the records and the requests of the
same study rehearsed in-process, one batch (and one upload) per file at the provider, nothing kept
aside, and no wait longer than the grace period.

The engine's clock is `util.clock` (`helpers.clocks.ClientClock`); the simulated provider keeps
the real one, as another machine would.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from lexpilot_batch.benchmark.settings import Settings
from lexpilot_batch.providers.batch import BatchBackend, CreateUncertain, UploadUncertain
from lexpilot_batch.providers.registry import api_spec, missing_sdk
from lexpilot_batch.study.runs import RunSpec
from tests.helpers.clocks import ClientClock
from tests.helpers.native import (  # noqa: F401 - the autouse `quick` is a fixture
    SIMULATED_APIS,
    quick,
    rehearse,
    run_on_routes,
)

GRACE = 5.0  # --create-grace
MINUTES_5, HOURS_2 = 300.0, 7200.0


@dataclass(frozen=True)
class Shape:
    """An API whose lost creates are looked for in its own way: its model, the simulated route that
    creates its batches, and the one that uploads its files where its uploads are listed."""

    name: str
    model: str
    create: str
    upload: str | None = None

    def __str__(self) -> str:
        return self.name


def _native(name: str) -> Shape:
    api = next(a for a in SIMULATED_APIS if a.name == name)
    return Shape(name, api.model, api.create)


SHAPES = (Shape("openai", "openai/gpt-sim", "create_batch", "upload_file"), _native("anthropic"), _native("together"))


class Killed(BaseException):
    """The command dies (SIGKILL, a power cut): nothing of it catches this."""


@dataclass(frozen=True)
class Story:
    name: str
    ahead: float  # the client's clock when the create is sent
    after: float  # ... and from the command after it on
    crash: bool  # the command dies after the create (else its answer is lost, and it goes on)

    def __str__(self) -> str:
        return self.name


STORIES = (
    Story("5-minutes-ahead", MINUTES_5, MINUTES_5, crash=False),
    Story("2-hours-ahead", HOURS_2, HOURS_2, crash=False),
    Story("set-right-in-between", HOURS_2, 0.0, crash=True),
)


def study(shape: Shape) -> RunSpec:
    """One DCG case, every role the shape's model: four waves of one file each."""
    return RunSpec(("r1",), (shape.model,), "dcg", Settings(user_model=shape.model, judge_model=shape.model), limit=1)


@pytest.fixture(params=SHAPES, ids=str)
def shape(request: pytest.FixtureRequest) -> Shape:
    problem = missing_sdk(request.param.name)
    if problem:
        pytest.skip(problem)
    return request.param


@pytest.fixture(scope="module")
def rehearsed(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    """Each shape's study rehearsed in-process, no fault, the real clock."""
    return {
        s.name: rehearse(tmp_path_factory.mktemp(f"rehearsed-{s.name}") / "ws", study(s))
        for s in SHAPES
        if not missing_sdk(s.name)
    }


def lose_answers(monkeypatch: pytest.MonkeyPatch, shape: Shape, story: Story, client: ClientClock) -> list[str]:
    """The shape's backend loses the answer of its first upload (where it lists uploads) and of its
    second create; for a crash, the command dies there and the clock is set right before the next."""
    backend: type[BatchBackend] = api_spec(shape.name).load()[0]
    real_create, real_upload = backend.create, backend.upload
    creates: list[str] = []
    uploads: list[str] = []

    def create(self, input_file_id, metadata, endpoint=None, source=None):
        info = real_create(self, input_file_id, metadata, endpoint, source)
        creates.append(info.id)
        if len(creates) == 2:
            if story.crash:
                client.ahead = story.after
                raise Killed()
            raise CreateUncertain("creating a batch: the answer was lost")
        return info

    def upload(self, path, name=None):
        file_id = real_upload(self, path, name)
        uploads.append(file_id)
        if len(uploads) == 1 and self.lists_uploads:
            raise UploadUncertain(f"uploading {path.name}: the answer was lost")
        return file_id

    monkeypatch.setattr(backend, "create", create)
    monkeypatch.setattr(backend, "upload", upload)
    return creates


@pytest.mark.parametrize("story", STORIES, ids=str)
def test_a_lost_create_is_found_again_whatever_the_clients_clock_says(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, shape: Shape, story: Story, rehearsed: dict[str, dict[str, Any]]
) -> None:
    client = ClientClock(monkeypatch, ahead=story.ahead)
    creates = lose_answers(monkeypatch, shape, story, client)
    out = run_on_routes(tmp_path / "ws", monkeypatch, study(shape), crash=Killed, create_grace=GRACE)
    clean = rehearsed[shape.name]

    assert set(out["threads"]) == {"done"} and out["records"] == clean["records"]
    assert out["requests"] == clean["requests"]  # request for request: nothing asked twice, no wave more
    assert out["stopped"] == int(story.crash) and out["anomalies"] == 0
    files = out["files"]
    assert len(creates) >= 2 and creates[1] in {f["batch_id"] for f in files}  # the lost create's batch, adopted
    assert out["server"][f"calls:{shape.create}"] == len(files), "a second batch for a file"
    assert out["other_batches"] == []
    if shape.upload is not None:
        assert out["server"][f"calls:{shape.upload}"] == len(files), "a second upload of a file"
    # Looked for within the grace period (and an upload a moment), never for hours.
    assert client.waited <= GRACE + 5.0, f"waited {client.waited:.0f} s"
