"""Hugging Face datasets (`data/hub.py`): `hf://datasets/...` URLs read as `huggingface_hub` reads
them, the file downloaded through the library from a stand-in for the Hub (`helpers.hub`) and
validated as a local file is, the commit its revision resolved to known online and offline, and
every refusal naming the file and what to do. The whole study on a Hub dataset, in processes the
library reads its variables in, is `scenarios/test_hub.py`."""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path

import huggingface_hub
import huggingface_hub.utils
import huggingface_hub.utils._http
import pytest

from lexpilot_batch.data import HubFile, dataset_source, open_dataset, validate_file
from lexpilot_batch.data.hub import parse_hub_url
from lexpilot_batch.errors import ConfigError, DataError
from lexpilot_batch.util.redaction import redact
from tests.helpers.hub import FILE, FakeHub, lexpilot_repo, point_library_at

REPO = "Medivvv/LexPilot"
CONTENTS = lexpilot_repo()[1]  # the dataset file's bytes by ref


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("hf://datasets/Medivvv/LexPilot", HubFile(REPO)),
        ("hf://datasets/Medivvv/LexPilot/", HubFile(REPO)),
        (f"hf://datasets/Medivvv/LexPilot/{FILE}", HubFile(REPO)),
        ("hf://datasets/Medivvv/LexPilot@v1.0", HubFile(REPO, revision="v1.0")),
        (f"hf://datasets/Medivvv/LexPilot@main/{FILE}", HubFile(REPO, revision="main")),
        ("hf://datasets/Medivvv/LexPilot@refs/pr/3/data/x.json", HubFile(REPO, "data/x.json", "refs/pr/3")),
        ("hf://datasets/Medivvv/LexPilot@refs%2Fheads%2Fdev/x.json", HubFile(REPO, "x.json", "refs/heads/dev")),
        ("hf://datasets/Medivvv/LexPilot/old/x@2.json", HubFile(REPO, "old/x@2.json")),
    ],
)
def test_a_url_names_the_repository_revision_and_file_as_the_library_reads_it(url, expected):
    assert parse_hub_url(url) == expected
    # and the URL it is written back as names the same file
    assert parse_hub_url(expected.url) == expected
    # ... as `huggingface_hub`'s own parser reads both, the file name left out meaning the benchmark's.
    # The extra admits releases without that parser (1.0.0 has none): there is nothing to compare with.
    parse_hf_uri = getattr(huggingface_hub.utils, "parse_hf_uri", None)
    if parse_hf_uri is None:
        pytest.skip(f"huggingface_hub {huggingface_hub.__version__} has no parse_hf_uri to compare with")
    theirs = parse_hf_uri(url)
    assert (theirs.type, theirs.id, theirs.revision) == ("dataset", expected.repo, expected.revision)
    assert theirs.path_in_repo in ("", expected.filename)
    assert parse_hf_uri(expected.url).path_in_repo == expected.filename


@pytest.mark.parametrize(
    ("url", "said"),
    [
        ("hf://Medivvv/LexPilot", "hf://datasets/OWNER/NAME"),
        ("hf://spaces/Medivvv/LexPilot", "models, spaces and buckets hold no LexPilot dataset"),
        ("hf://datasets/Medivvv", "must be named OWNER/NAME"),
        ("hf://datasets/Medivvv/LexPilot@/x.json", "nothing after '@'"),
    ],
)
def test_a_url_naming_no_dataset_file_is_refused_saying_how_one_is_written(url, said):
    with pytest.raises(DataError, match="e.g. hf://datasets/Medivvv/LexPilot@main/") as caught:
        parse_hub_url(url)
    assert said in str(caught.value)


def test_anything_else_is_a_local_path(tmp_path):
    assert dataset_source(None) is None
    assert dataset_source("LexPilot_release_multiturn.json") == Path("LexPilot_release_multiturn.json")
    assert dataset_source(str(tmp_path / "hf" / "x.json")) == tmp_path / "hf" / "x.json"
    assert isinstance(dataset_source("hf://datasets/Medivvv/LexPilot"), HubFile)


@pytest.fixture
def hub(monkeypatch, tmp_path):
    stand_in = FakeHub({REPO: lexpilot_repo()[0]})
    with stand_in.serving():
        point_library_at(monkeypatch, stand_in, tmp_path / "hf")
        yield stand_in


def test_the_file_is_downloaded_through_the_library_validated_and_its_commit_known(hub, tmp_path):
    repo = hub.repos[REPO]
    for revision in (None, "main", "v0.9"):
        dataset = open_dataset(HubFile(REPO, revision=revision))
        ref = revision or "main"
        assert dataset.sha256 == hashlib.sha256(CONTENTS[ref]).hexdigest()
        assert dataset.hub is not None and dataset.hub.commit == repo.refs[ref]
        # read from the library's cache, where the commit is the snapshot's folder
        assert dataset.path.is_relative_to(tmp_path / "hf" / "hub" / "datasets--Medivvv--LexPilot" / "snapshots")
        assert dataset.path.parent.name == repo.refs[ref]
        assert dataset.source == HubFile(REPO, revision=revision).url
        assert len(dataset) == 18
    assert ("HEAD", f"/datasets/{REPO}/resolve/v0.9/{FILE}", None) in hub.requests
    # a commit the cache holds is read without asking the Hub
    asked = len(hub.requests)
    pinned = open_dataset(HubFile(REPO, revision=repo.refs["v0.9"])).hub
    assert pinned is not None and pinned.commit == repo.refs["v0.9"]
    assert len(hub.requests) == asked


def test_validate_data_names_the_url_its_commit_and_the_cached_copy(hub):
    rendered = validate_file(HubFile(REPO)).render()
    commit = hub.repos[REPO].refs["main"]
    assert f"Dataset      hf://datasets/{REPO}/{FILE}\nCommit       {commit}\nCached at    " in rendered
    assert rendered.endswith("valid")


@pytest.mark.parametrize(
    ("file", "said"),
    [
        (HubFile(REPO, revision="v2"), "has no revision 'v2'"),
        (HubFile("Medivvv/Other"), "has no dataset Medivvv/Other, or it is private"),
        (HubFile(REPO, "other.json"), "has no file 'other.json' at revision main"),
    ],
)
def test_what_the_hub_refuses_is_said_of_the_url_with_what_to_do(hub, file, said):
    with pytest.raises(DataError) as caught:
        open_dataset(file)
    message = str(caught.value)
    assert message.startswith(f"{file.url}: ") and said in message and hub.url in message


def test_a_file_that_is_no_lexpilot_dataset_is_refused_naming_its_url_commit_and_cached_copy(hub):
    repo = hub.repos[REPO]
    repo.commits[repo.refs["main"]][FILE] = b'[{"case_number": 1}]'
    with pytest.raises(DataError) as caught:
        open_dataset(HubFile(REPO))
    message = str(caught.value)
    assert message.startswith(f"hf://datasets/{REPO}/{FILE} (commit {repo.refs['main'][:12]}), cached as ")
    assert "is invalid" in message and "cause_of_action" in message


def test_offline_the_cache_answers_and_a_file_it_lacks_is_refused_naming_the_cache_and_its_filling(
    hub, monkeypatch, tmp_path
):
    online = open_dataset(HubFile(REPO, revision="main"))
    point_library_at(monkeypatch, hub, tmp_path / "hf", offline=True)
    asked = len(hub.requests)
    offline = open_dataset(HubFile(REPO, revision="main"))  # the ref the cache recorded
    assert offline.hub is not None and online.hub is not None
    assert (offline.sha256, offline.hub.commit) == (online.sha256, online.hub.commit)
    with pytest.raises(DataError) as caught:
        open_dataset(HubFile(REPO, revision="v0.9"))
    assert len(hub.requests) == asked  # nothing asked of the Hub
    url = f"hf://datasets/{REPO}@v0.9/{FILE}"
    assert str(caught.value) == (
        f"{url} is not in the Hugging Face cache {tmp_path / 'hf' / 'hub'}, and HF_HUB_OFFLINE is set, so the Hub is "
        f"not asked: fill it with `lexpilot-batch validate-data --dataset {url}` (or `hf download {REPO} {FILE} "
        "--repo-type dataset --revision v0.9`) where the Hub can be reached, with HF_HUB_OFFLINE unset and the same "
        "HF_HOME; or point HF_HOME (or HF_HUB_CACHE) at the cache that holds it."
    )


def test_an_unreachable_hub_with_nothing_cached_names_the_endpoint_the_cache_and_a_mirror(hub, monkeypatch, tmp_path):
    stopped = FakeHub({})
    with stopped.serving():
        pass  # its port is closed again: nothing listens there
    point_library_at(monkeypatch, stopped, tmp_path / "empty")
    # The library tries again a few times, seconds apart, as it would for a user: not in a test.
    monkeypatch.setattr(huggingface_hub.utils._http.time, "sleep", lambda seconds: None)
    with pytest.raises(DataError) as caught:
        open_dataset(HubFile(REPO))
    message = str(caught.value)
    assert f"{stopped.url} could not be reached" in message
    assert str(tmp_path / "empty" / "hub") in message and "HF_ENDPOINT" in message


def test_a_private_dataset_is_read_with_hf_token_which_no_message_shows(hub, monkeypatch):
    token = "hf_SENTINELtoken0123456789"
    hub.repos[REPO].token = token
    with pytest.raises(DataError, match="set HF_TOKEN"):
        open_dataset(HubFile(REPO))
    monkeypatch.setenv("HF_TOKEN", token)
    assert open_dataset(HubFile(REPO)).hub is not None
    assert hub.requests[-1][2] == f"Bearer {token}"  # the library sent it
    assert redact(f"echoed: {token}") == "echoed: [redacted HF_TOKEN]"


def test_without_the_extra_a_hub_dataset_names_the_extra_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "huggingface_hub", None)
    with pytest.raises(ConfigError) as caught:
        open_dataset(HubFile(REPO))
    assert str(caught.value) == (
        "hf:// datasets need the optional extra 'hub': python -m pip install \"lexpilot-batch[hub]\" "
        '(from a clone of the repository: python -m pip install -e ".[hub]")'
    )
