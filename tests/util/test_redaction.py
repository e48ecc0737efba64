"""The one redaction rule (`redaction`): what it removes, what it leaves, and that every key variable
the product reads is one it knows. The whole product against a header-echoing gateway is
`scenarios/test_secrets.py`'s."""

from __future__ import annotations

import base64
import json

import pytest

from lexpilot_batch.benchmark.settings import ROLES
from lexpilot_batch.providers.registry import PROVIDERS
from lexpilot_batch.providers.routing.endpoints import Endpoint
from lexpilot_batch.util import redaction
from lexpilot_batch.util.redaction import (
    KEY_QUERY_PARAMETERS,
    MIN_SECRET_LENGTH,
    has_credentials,
    is_key_variable,
    redact,
    redact_data,
    redact_url,
    register_secret,
)

KEY = "sk-test-0123456789abcdef"
# A key of no known shape (Mistral's and Together's keys have none): only known, it is redacted.
SHAPELESS = "Zq7tRw2mXv9kLp4sNc8d"


@pytest.fixture(autouse=True)
def no_secrets(monkeypatch):
    """Only the variables and registrations of the test itself."""
    import os

    for name in list(os.environ):
        if is_key_variable(name) or name.upper().endswith("_BASE_URL"):
            monkeypatch.delenv(name)
    monkeypatch.setattr(redaction, "_registered", {})


def test_every_key_variable_the_product_reads_is_a_key_variable():
    names = {f"LEXPILOT_{role.upper()}_API_KEY" for role in ROLES} | {"OPENAI_API_KEY"}
    names |= {p.key_var_for("my-svc") for p in PROVIDERS.values()}
    assert "MY_SVC_API_KEY" in names and "GOOGLE_API_KEY" in names and "AZURE_OPENAI_API_KEY" in names
    assert all(is_key_variable(name) for name in names), names
    assert is_key_variable("anthropic_auth_token")  # the anthropic SDK reads it on its own
    assert not is_key_variable("OPENAI_BASE_URL") and not is_key_variable("LEXPILOT_MODEL")


def test_a_key_in_the_environment_is_named_by_its_variable(monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    text = f'{{"x-api-key": "{KEY}"}} and again {KEY}.'
    assert redact(text) == '{"x-api-key": "[redacted ANTHROPIC_API_KEY]"} and again [redacted ANTHROPIC_API_KEY].'


def test_one_key_in_two_variables_names_both(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.setenv("LEXPILOT_JUDGE_API_KEY", KEY)
    assert redact(KEY) == "[redacted LEXPILOT_JUDGE_API_KEY or OPENAI_API_KEY]"


def test_a_key_set_after_an_earlier_call_is_redacted_too(monkeypatch):
    assert redact(SHAPELESS) == SHAPELESS
    monkeypatch.setenv("DEEPSEEK_API_KEY", SHAPELESS)
    assert redact(SHAPELESS) == "[redacted DEEPSEEK_API_KEY]"


def test_a_key_handed_to_a_client_is_registered_whatever_its_variable(monkeypatch):
    """A model list names any variable (`key_var = "LOCAL_SECRET"`): the key is registered when a
    client takes it, so that its echo is redacted although the name says nothing."""
    monkeypatch.setenv("LOCAL_SECRET", SHAPELESS)
    assert redact(SHAPELESS) == SHAPELESS  # not a key variable's name
    Endpoint("eval", "http://h/v1", "LOCAL_SECRET", SHAPELESS).require_key()
    assert redact(f"echo {SHAPELESS}") == "echo [redacted LOCAL_SECRET]"
    assert Endpoint("eval", "sim", "simulated", "simulated-key", "simulated").require_key() == "simulated-key"
    assert "simulated-key" not in redaction._registered  # the simulated provider's is no secret


@pytest.mark.parametrize("value", ["", "x", "EMPTY", "a" * (MIN_SECRET_LENGTH - 1)])
def test_a_short_or_empty_key_is_no_secret(monkeypatch, value):
    monkeypatch.setenv("OPENAI_API_KEY", value)
    register_secret("LOCAL_SECRET", value)
    text = "EMPTY keys for vLLM; a x aaaaaaa"
    assert redact(text) == text


def test_a_key_is_found_as_json_and_url_encoders_write_it(monkeypatch):
    key = "sk/test+0123456789=="
    monkeypatch.setenv("OPENAI_API_KEY", key)
    escaped = key.replace("/", "\\/")
    for form in (key, escaped, "sk%2Ftest%2B0123456789%3D%3D"):
        assert redact(f"<{form}>") == "<[redacted OPENAI_API_KEY]>", form


def test_userinfo_of_any_url_is_removed():
    text = "at http://user:PASSWORD@proxy.example/v1 and https://KEYKEYKEY@h.example:8443/x"
    assert redact(text) == "at http://[redacted]@proxy.example/v1 and https://[redacted]@h.example:8443/x"


def test_userinfo_of_a_base_url_is_removed_wherever_it_shows(monkeypatch):
    monkeypatch.setenv("OPENAI_BASE_URL", "http://user:s3cret-pass@proxy.example/v1")
    assert redact("gateway said: bad password s3cret-pass") == (
        "gateway said: bad password [redacted OPENAI_BASE_URL userinfo]"
    )


@pytest.mark.parametrize("name", KEY_QUERY_PARAMETERS)
def test_key_like_query_parameters_are_removed(name):
    upper = name.upper()
    text = f"GET https://h/v1/files?api-version=2024-10-21&{upper}=v4lue-x#f failed"
    assert redact(text) == f"GET https://h/v1/files?api-version=2024-10-21&{upper}=[redacted]#f failed"


def test_a_query_key_of_a_base_url_is_removed_wherever_it_shows(monkeypatch):
    monkeypatch.setenv("SIMA_BASE_URL", "https://h/v1?api-key=qk-0123456789")
    assert redact("POST /v1?api-key=qk-0123456789files") == "POST /v1?api-key=[redacted SIMA_BASE_URL query]files"
    # ... while a record of the URL does not depend on the variable it came from
    assert redact_url("https://h/v1?api-key=qk-0123456789") == "https://h/v1?api-key=[redacted]"


def test_authorization_credentials_are_removed_prose_is_not():
    basic = base64.b64encode(b"user:PASS").decode()
    assert redact("Authorization: Bearer tok-unknown.123") == "Authorization: Bearer [redacted]"
    assert redact(f"authorization: basic {basic}") == "authorization: basic [redacted]"
    assert redact("x-goog-api-key: AIzaUnknownKey12345") == "x-goog-api-key: [redacted]"
    assert redact('{"api-key": "0123456789abcdef"}') == '{"api-key": "[redacted]"}'
    prose = (
        "HTTP Basic authentication required; Bearer authentication failed; token_limit_exceeded: Limit: "
        "2,000,000 enqueued tokens; see https://platform.openai.com/docs/guides/batch?lang=python"
    )
    assert redact(prose) == prose


def test_redaction_is_idempotent_and_keeps_json_valid(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    body = json.dumps(
        {
            "error": {
                "message": f"headers: Authorization: Bearer {KEY}; x-api-key: {KEY}",
                "url": f"http://u:p@h/?key={KEY}",
            }
        }
    )
    once = redact(body)
    assert redact(once) == once
    assert KEY not in once and "[redacted OPENAI_API_KEY]" in once
    assert json.loads(once)["error"]["url"] == "http://[redacted]@h/?key=[redacted OPENAI_API_KEY]"


def test_redact_data_reaches_every_string(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    data = {"error": {"message": KEY, "list": [1, None, {KEY: [KEY]}]}, "n": 2}
    assert redact_data(data) == {
        "error": {
            "message": "[redacted OPENAI_API_KEY]",
            "list": [1, None, {"[redacted OPENAI_API_KEY]": ["[redacted OPENAI_API_KEY]"]}],
        },
        "n": 2,
    }


def test_has_credentials():
    assert has_credentials("https://u:p@h/v1") and has_credentials("https://u@h/v1")
    assert has_credentials("https://h/v1?API-KEY=1") and has_credentials("https://h/v1?x=1&sig=abc")
    assert not has_credentials("https://h.openai.azure.com/openai/v1?api-version=2024-10-21")
    assert not has_credentials("http://127.0.0.1:8000/v1")


# --- key shapes, redacting before cutting, and saved files (issue 44) ---------------------------------

SHAPED = {
    "openai": "sk-proj-Cw8TqL2vN6xR9zK4mB7yP3dF",
    "anthropic": "sk-ant-api03-Zr4X7q2LmN9pT6vW1yB8cD3f",
    "groq": "gsk_Aa1Bb2Cc3Dd4Ee5Ff6Gg7Hh8",
    "google": "AIza" + "SyD4f7Gh2Jk9Lm3Np6Qr8St1Uv5Wx0Yz2Ab",
}


@pytest.mark.parametrize("key", SHAPED.values(), ids=SHAPED.keys())
def test_a_key_of_a_known_shape_is_redacted_though_nobody_set_it(key):
    assert redact(f"echo: {key}.") == "echo: [redacted]."
    assert redact(f'{{"k": "{key}"}}') == '{"k": "[redacted]"}'


@pytest.mark.parametrize(
    "text",
    ["risk-free and task-based work", "sk-short", "ask-0123456789abcdefghijklmnop", "id-sk-0123456789abcdefghijklm"],
)
def test_words_and_ids_that_only_look_like_a_prefix_stay(text):
    assert redact(text) == text


@pytest.mark.parametrize("kept", range(1, len(KEY)))
def test_redact_cut_redacts_before_it_cuts(monkeypatch, kept):
    """A key straddling the cut, by every number of its characters, leaves none of them."""
    monkeypatch.setenv("OPENAI_API_KEY", SHAPELESS)
    for key in (SHAPELESS, SHAPED["openai"]):
        text = "x" * (79 - min(kept, len(key) - 1)) + " " + key + " and the rest"
        cut = redaction.redact_cut(text, 80)
        assert len(cut) <= 80 and cut.startswith("x")
        assert not any(key[i : i + 4] in cut for i in range(len(key) - 3)), cut
    assert redaction.redact_cut("short", 80) == "short" and redaction.redact_cut("", 5) == ""
    # A huge body costs no more than its window: nothing past it is read.
    assert redaction.redact_cut("y" * 50_000_000 + SHAPELESS, 10) == "y" * 10


def scrubbed(chunks: list[bytes]) -> tuple[bytes, int]:
    scrubber = redaction.Scrubber()
    return b"".join(redaction.scrub(chunks, scrubber)), scrubber.replaced


def test_a_scrubber_replaces_keys_and_nothing_else(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", SHAPELESS)
    monkeypatch.setenv("ANTHROPIC_API_KEY", SHAPED["anthropic"])
    line = {
        "custom_id": "r-1",
        "echo": f"key {SHAPELESS}, {SHAPED['anthropic']}, {SHAPED['openai']}, x-{SHAPED['anthropic']}",
        "auth": "Authorization: Bearer tok.en-123456 and Bearer authentication",
        "answer": "根据您提供的信息，risk-free 与 task-based 都不是密钥。",
    }
    data = (json.dumps(line, ensure_ascii=False) + "\n").encode()
    out, replaced = scrubbed([data])
    assert replaced == 5
    clean = json.loads(out)
    assert clean["echo"] == (
        "key [redacted OPENAI_API_KEY], [redacted ANTHROPIC_API_KEY], [redacted], x-[redacted ANTHROPIC_API_KEY]"
    )
    assert clean["auth"] == "Authorization: Bearer [redacted] and Bearer authentication"
    assert clean["answer"] == line["answer"] and clean["custom_id"] == "r-1"  # the rest as it came
    plain = (json.dumps({"custom_id": "r-2", "answer": line["answer"]}, ensure_ascii=False) + "\n").encode()
    assert scrubbed([plain]) == (plain, 0)


def test_a_key_straddling_any_chunk_boundary_is_caught_whole(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", SHAPELESS)
    data = (
        f'{{"a": "{SHAPELESS}", "b": "see {SHAPED["google"]}", "c": "Bearer ab.cd-1234", "d": "{SHAPED["groq"]}"}}\n'
    ).encode() * 3
    whole, replaced = scrubbed([data])
    assert replaced == 12 and b"redacted" in whole
    for size in range(1, len(data) + 1):
        pieces = [data[i : i + size] for i in range(0, len(data), size)]
        assert scrubbed(pieces) == (whole, 12), size
