"""Provider-qualified model names, routes and body dialects (`providers.registry`, `routes`, `dialects`)."""

from __future__ import annotations

import pytest

from lexpilot_batch.benchmark.settings import Settings
from lexpilot_batch.errors import ConfigError
from lexpilot_batch.providers.bodies.request import applied_settings, is_openai_reasoning_model, role_request
from lexpilot_batch.providers.prefixes import parse_model
from lexpilot_batch.providers.registry import PROVIDERS, chat_policy
from lexpilot_batch.providers.routing.endpoints import endpoint_identity
from lexpilot_batch.providers.routing.routes import ModelRoute, RouteRules, resolve_route
from lexpilot_batch.simulated.completions import check_openai
from lexpilot_batch.simulated.errors import ApiError


@pytest.mark.parametrize(
    ("name", "key", "sent"),
    [
        ("openai/gpt-4o-mini", "openai", "gpt-4o-mini"),
        ("azure/my-gpt4o-batch", "azure", "my-gpt4o-batch"),
        ("dashscope/qwen-plus", "dashscope", "qwen-plus"),
        ("deepseek/deepseek-chat", "deepseek", "deepseek-chat"),
        ("openai-api/sima/m1", "openai-api/sima", "m1"),
        ("openai-api/vllm/Qwen/Qwen2.5-7B-Instruct", "openai-api/vllm", "Qwen/Qwen2.5-7B-Instruct"),
        ("gpt-4o-mini", None, "gpt-4o-mini"),
        ("Qwen/Qwen2.5-7B-Instruct", None, "Qwen/Qwen2.5-7B-Instruct"),  # a Hugging Face id stays bare
        ("meta-llama/Llama-3.1-8B-Instruct", None, "meta-llama/Llama-3.1-8B-Instruct"),
    ],
)
def test_a_prefix_names_the_provider_and_the_rest_is_sent(name, key, sent):
    parsed = parse_model(name)
    assert (parsed.name, parsed.key, parsed.sent) == (name, key, sent)


def test_an_unknown_prefix_lists_the_known_ones():
    with pytest.raises(ConfigError) as caught:
        parse_model("sambanova/meta-llama/Llama-3-8b", "--judge-model")
    message = str(caught.value)
    for needle in ("--judge-model sambanova/", "openai/", "azure/", "dashscope/", "deepseek/", "openai-api/<service>/"):
        assert needle in message
    for needle in ("mistral/", "groq/", "zhipu/", "qianfan/", "siliconflow/", "moonshot/", "ark/", "together/"):
        assert needle in message
    assert "openai-api/sambanova/meta-llama/Llama-3-8b" in message and "SAMBANOVA_BASE_URL" in message
    assert "fireworks/" in message  # a prefix of its own now (providers/fireworks/)


def test_inspect_ais_grok_prefix_is_named_as_ours_and_vllm_is_refused_not_sent_bare():
    """inspect_ai writes xAI's models grok/<model>; here they are xai/<model>. vllm/ is not a prefix
    here: read as a bare name it would go to the role's default endpoint."""
    with pytest.raises(
        ConfigError,
        match=r"--model grok/grok-4: grok/ is inspect_ai's prefix for these models; here it is xai/: write xai/grok-4$",
    ):
        parse_model("grok/grok-4", "--model")
    with pytest.raises(ConfigError, match=r"unknown provider prefix 'vllm/'.*openai-api/vllm/Qwen/Qwen3-8B"):
        parse_model("vllm/Qwen/Qwen3-8B")
    assert parse_model("vertex/gemini-2.5-flash").key == "vertex"


def test_mistral_groq_and_together_are_prefixes_now():
    """Issue 28: `mistral/`, `groq/` and `together/` were refused as other tools' prefixes (the last
    saying why: its Batch API now has its folder, providers/together/)."""
    assert parse_model("mistral/mistral-small-latest").provider is not None
    assert parse_model("groq/llama-3.1-8b-instant").key == "groq"
    together = parse_model("together/meta-llama/Llama-3-8b", "--model")
    assert together.key == "together" and together.sent == "meta-llama/Llama-3-8b"


@pytest.mark.parametrize(
    ("name", "api", "url_var", "key_var"),
    [
        ("anthropic/claude-sonnet-4", "anthropic", "ANTHROPIC_BASE_URL", "ANTHROPIC_API_KEY"),
        ("google/gemini-2.5-flash", "google", "GOOGLE_GEMINI_BASE_URL", "GOOGLE_API_KEY"),
    ],
)
def test_anthropic_and_google_go_to_their_native_batch_apis(name, api, url_var, key_var):
    parsed = parse_model(name)
    assert parsed.sent == name.partition("/")[2] and parsed.provider is not None and parsed.provider.api == api
    r = route("eval", name, {url_var: "http://127.0.0.1:9/", key_var: "k"})
    assert (r.api, r.backend, r.endpoint.base_url, r.endpoint.key_var) == (api, "batch", "http://127.0.0.1:9", key_var)
    assert (r.limits.max_requests, r.limits.max_bytes) == (100_000, (256 if api == "anthropic" else 2048) * 1_000_000)
    # Rehearsed (`--provider simulated`) on the simulated provider's routes of its own API, within
    # the same limits: its real run's lines, backend and SDK.
    sim = route("eval", name, {}, choices={"eval": "simulated"})
    assert (sim.api, sim.backend, sim.endpoint.base_url) == (api, "simulated", f"simulated/{api}")
    assert sim.limits == r.limits
    # `sync` sends each request through the API's own synchronous call (`providers.anthropic.chat`, `providers.google.chat`);
    # `manual` files are run by OpenAI-format tools: refused, with the way out.
    assert route("eval", name, {}, choices={"eval": "sync"}).api == api
    with pytest.raises(ConfigError, match="manual backend.*openai-api/<service>/"):
        route("eval", name, {}, choices={"eval": "manual"})
    with pytest.raises(ConfigError, match=f"the {api} profile is for"):  # its limits, not a bare name's
        route("eval", "gpt-4o-mini", {}, profiles={"eval": api})


@pytest.mark.parametrize(("name", "needle"), [("openai/", "no model name"), ("openai-api/gpt-4o", "<service>")])
def test_a_name_missing_a_part_is_refused(name, needle):
    with pytest.raises(ConfigError, match=needle):
        parse_model(name)


# --- routes ----------------------------------------------------------------------------------------


def route(role: str, model: str, env: dict[str, str], **rules):
    return resolve_route(role, model, parse_model(model).key, RouteRules(environ=env, **rules))


def test_each_prefix_has_its_endpoint_key_variable_backend_and_limits():
    env = {"OPENAI_API_KEY": "k1", "DASHSCOPE_API_KEY": "k2"}
    openai = route("eval", "openai/gpt-4o-mini", env)
    assert (openai.endpoint.base_url, openai.endpoint.key_var, openai.endpoint.api_key) == (
        "https://api.openai.com/v1",
        "OPENAI_API_KEY",
        "k1",
    )
    assert (openai.backend, openai.limits.max_requests) == ("batch", 50_000)
    dashscope = route("eval", "dashscope/qwen-plus", env)
    assert dashscope.endpoint.base_url == "https://dashscope.aliyuncs.com/compatible-mode/v1"
    assert dashscope.endpoint.key_var == "DASHSCOPE_API_KEY" and dashscope.limits.max_bytes > 200 * 2**20
    deepseek = route("judge", "deepseek/deepseek-reasoner", env)
    assert (deepseek.backend, deepseek.endpoint.key_var, deepseek.endpoint.api_key) == (
        "sync",
        "DEEPSEEK_API_KEY",
        None,
    )
    azure = route("eval", "azure/dep", {"AZURE_OPENAI_BASE_URL": "https://r.openai.azure.com/openai/v1/"})
    assert azure.endpoint.base_url == "https://r.openai.azure.com/openai/v1"
    assert (azure.limits.max_requests, azure.limits.endpoint) == (50_000, "/chat/completions")  # the REST reference's


def test_environment_variables_override_url_and_key_per_provider_and_never_per_role():
    env = {
        "OPENAI_BASE_URL": "https://proxy.example/v1",
        "LEXPILOT_EVAL_BASE_URL": "https://role.example/v1",  # for bare names of the role only
        "SIMA_BASE_URL": "http://127.0.0.1:4001/v1",
        "SIMA_API_KEY": "ka",
    }
    assert route("eval", "openai/gpt-4o-mini", env).endpoint.base_url == "https://proxy.example/v1"
    assert route("eval", "gpt-4o-mini", env).endpoint.base_url == "https://role.example/v1"
    sima = route("eval", "openai-api/sima/m1", env)
    assert (sima.endpoint.base_url, sima.endpoint.key_var, sima.endpoint.api_key) == (
        "http://127.0.0.1:4001/v1",
        "SIMA_API_KEY",
        "ka",
    )
    own = route("eval", "openai-api/sima/m1", env, model_routes={"openai-api/sima/m1": ModelRoute("http://h/v1", "K")})
    assert (own.endpoint.base_url, own.endpoint.key_var) == ("http://h/v1", "K")


def test_an_endpoint_without_a_default_names_its_variable():
    with pytest.raises(ConfigError, match="set AZURE_OPENAI_BASE_URL"):
        route("eval", "azure/dep", {})
    with pytest.raises(ConfigError, match="set MY_SVC_BASE_URL"):
        route("eval", "openai-api/my-svc/m", {})


def test_a_missing_key_names_the_providers_variable():
    with pytest.raises(ConfigError, match=r"dashscope/qwen-plus\) at .*: set DASHSCOPE_API_KEY"):
        route("user", "dashscope/qwen-plus", {}).endpoint.require_key()


def test_batch_for_a_provider_without_a_batch_api_is_refused():
    with pytest.raises(ConfigError, match="DeepSeek has no Batch API.*--judge-backend"):
        route("judge", "deepseek/deepseek-chat", {}, choices={"judge": "batch"})
    with pytest.raises(ConfigError, match="the model list chose the batch backend"):
        route(
            "judge", "deepseek/deepseek-chat", {}, model_routes={"deepseek/deepseek-chat": ModelRoute(backend="batch")}
        )
    assert route("judge", "deepseek/deepseek-chat", {}, choices={"judge": "manual"}).backend == "manual"


def test_the_simulated_backend_keeps_no_provider_endpoint():
    sim = route("judge", "azure/dep", {}, choices={"judge": "simulated"})  # no AZURE_OPENAI_BASE_URL needed
    assert (sim.backend, sim.label, sim.limits.endpoint) == ("simulated", "simulated", "/v1/chat/completions")


@pytest.mark.parametrize(
    ("url", "identity"),
    [
        ("http://127.0.0.1:41234/v1", "http://127.0.0.1:*/v1"),
        ("http://localhost:8000/v1", "http://localhost:*/v1"),
        ("http://[::1]:9/v1", "http://[::1]:*/v1"),
        ("https://api.openai.com/v1", "https://api.openai.com/v1"),
        ("https://user:secret@example.com:8443/v1", "https://example.com:8443/v1"),
    ],
)
def test_an_endpoint_identity_has_no_loopback_port_and_no_credentials(url, identity):
    assert endpoint_identity(url) == identity


# --- dialects ----------------------------------------------------------------------------------------

REASONING = ["o1", "o1-mini", "o3", "o3-mini", "o3-pro", "o4-mini", "o4-mini-2025-04-16", "gpt-5", "gpt-5-mini"]
REASONING += ["gpt-5-nano", "gpt-5.1", "gpt-5-2025-08-07", "codex-mini-latest"]
NOT_REASONING = ["gpt-4o-mini", "gpt-4.1", "gpt-5-chat-latest", "qwen-plus", "deepseek-reasoner", "omni", "o"]


@pytest.mark.parametrize("model", REASONING + NOT_REASONING)
def test_the_client_and_the_simulated_provider_agree_on_reasoning_models(model):
    """Two rules written apart (the client's, and the provider's in `simulated`): a body the client
    builds for a model is one the provider accepts."""
    assert is_openai_reasoning_model(model) == (model in REASONING)
    body = role_request("judge", parse_model(f"openai/{model}"), Settings()).body
    check_openai({"model": model, "messages": [{"role": "user", "content": "x"}], **body})  # accepted
    legacy = {"model": model, "messages": [{"role": "user", "content": "x"}], "temperature": 0.1, "max_tokens": 8}
    if model in REASONING:
        with pytest.raises(ApiError) as refused:
            check_openai(legacy)
        assert refused.value.status == 400 and refused.value.code == "unsupported_parameter"
    else:
        check_openai(legacy)


def test_each_dialect_sends_its_fields_in_order():
    settings = Settings(temperature=0.7, judge_temperature=0.1, max_tokens=100)
    assert role_request("eval", parse_model("openai/gpt-4o-mini"), settings).body == {
        "temperature": 0.7,
        "max_completion_tokens": 100,
        "n": 1,
    }
    judge = role_request("judge", parse_model("openai/o4-mini"), settings, reasoning_effort="high")
    assert judge.body == {"max_completion_tokens": 100, "n": 1, "reasoning_effort": "high"}
    assert judge.not_applied == ("temperature",) and judge.model == "o4-mini" and judge.provider == "openai"
    for name in ("dashscope/qwen-plus", "deepseek/deepseek-chat", "openai-api/x/m", "gpt-4o-mini"):
        body = role_request("user", parse_model(name), settings).body
        assert list(body.items()) == [("temperature", 0.7), ("max_tokens", 100), ("n", 1)]
    # reasoning_effort goes to reasoning models only; `reasoning` overrides the name (an Azure deployment)
    assert (
        "reasoning_effort"
        not in role_request("eval", parse_model("openai/gpt-4o"), settings, reasoning_effort="low").body
    )
    deployment = role_request("eval", parse_model("azure/prod-1"), settings, reasoning=True)
    assert "temperature" not in deployment.body


def test_model_args_set_and_remove_fields_and_the_settings_say_what_was_applied():
    settings = Settings(temperature=0.7, judge_temperature=0.1)
    args = {"top_p": 0.9, "temperature": None, "response_format": {"type": "json_object"}}
    eval_ = role_request("eval", parse_model("dashscope/qwen-plus"), settings, args=args)
    assert eval_.body == {"max_tokens": 8192, "n": 1, "top_p": 0.9, "response_format": {"type": "json_object"}}
    assert eval_.model_args == args and eval_.not_applied == ("temperature",)
    user = role_request("user", parse_model("gpt-4o-mini"), settings)
    judge = role_request("judge", parse_model("openai/o3"), settings)
    applied = applied_settings(settings, {"eval": eval_, "user": user, "judge": judge})
    assert (applied.temperature, applied.judge_temperature, applied.max_tokens) == (0.7, None, 8192)
    no_user_temp = role_request("user", parse_model("openai/o4-mini"), settings)
    assert applied_settings(settings, {"eval": eval_, "user": no_user_temp, "judge": judge}).temperature is None


@pytest.mark.parametrize(
    ("name", "meant"),
    [
        ("opneai/gpt-4o-mini", "openai/"),  # transposed letters
        ("OpenAI/gpt-4o-mini", "openai/"),  # another case
        ("opanai/gpt-4o-mini", "openai/"),
        ("anthropc/claude-3-5-haiku", "anthropic/"),
        ("gogle/gemini-2.0-flash", "google/"),
        ("Dashscope/qwen-plus", "dashscope/"),
    ],
)
def test_a_near_miss_of_a_known_prefix_is_refused_with_the_prefix_meant(name, meant):
    """Issue 29 item 1: `opneai/gpt-4o-mini` was accepted as a bare name and would have gone to
    OPENAI_BASE_URL as it is."""
    with pytest.raises(ConfigError) as caught:
        parse_model(name)
    assert f"did you mean {meant!r}" in str(caught.value)


@pytest.mark.parametrize("name", ["Qwen/Qwen2.5-7B-Instruct", "deepseek-ai/DeepSeek-R1", "THUDM/glm-4-9b-chat"])
def test_hugging_face_ids_are_no_near_miss(name):
    assert parse_model(name).provider is None


def test_a_bare_name_with_a_slash_needs_the_endpoint_that_serves_it():
    """Without LEXPILOT_<ROLE>_BASE_URL or OPENAI_BASE_URL, `org/model` would go to OpenAI."""
    with pytest.raises(ConfigError) as caught:
        route("eval", "Qwen/Qwen2.5-7B-Instruct", {})
    message = str(caught.value)
    assert "LEXPILOT_EVAL_BASE_URL or OPENAI_BASE_URL" in message and "openai-api/<service>/" in message
    served = route("eval", "Qwen/Qwen2.5-7B-Instruct", {"OPENAI_BASE_URL": "http://127.0.0.1:8000/v1"})
    assert served.endpoint.base_url == "http://127.0.0.1:8000/v1"
    assert route("eval", "gpt-4o-mini", {}).endpoint.base_url == "https://api.openai.com/v1"


def test_an_ark_request_waits_as_long_as_arks_own_sdk_lets_it():
    """Ark's batch chat route queues a request: its SDK waits up to its client timeout and retries
    408, 409, 429 and 5xx with waits capped at 8 s until then (`batch_chat.completions.create`)."""
    assert chat_policy("ark", 120.0, 5) == (600.0, 75)
    assert chat_policy("ark", 900.0, 5) == (900.0, 75)  # a longer --timeout wins
    assert chat_policy("openai", 120.0, 5) == chat_policy(None, 120.0, 5) == (120.0, 5)
    sdk = pytest.importorskip("volcenginesdkarkruntime._constants")
    assert PROVIDERS["ark"].chat_timeout == sdk.DEFAULT_TIMEOUT_SECONDS
    assert PROVIDERS["ark"].chat_retries == int(sdk.DEFAULT_TIMEOUT_SECONDS // sdk.MAX_RETRY_DELAY)
