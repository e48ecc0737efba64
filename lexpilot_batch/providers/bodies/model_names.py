"""Which model names an API can serve: one rule, kept by `prepare` (`bodies.contract`) and by the
simulated provider on every route, so that a rehearsal with a mistyped model fails the way the
real API would, with one line saying why.

The real APIs answer a model they do not serve with their own error: OpenAI 404
`invalid_request_error` / `model_not_found` ("The model `x` does not exist or you do not have
access to it"); Anthropic 404 `not_found_error` ("model: x"; in a Message Batch, that request's
result is `errored`); Gemini 404 `NOT_FOUND` ("models/x is not found for API version v1beta, or is
not supported for generateContent"); Mistral 400 `invalid_model` ("Invalid model: x", code 1500).
Which names those are, from sources nobody on this project wrote:

1. **No name**: an empty or blank `model`.
2. **Our prefix left on**, on a lab's own API: a name that still starts with one of our provider
   prefixes (`registry.PROVIDERS`) followed by a name the model families know (`bodies.families`), such as
   `openai/gpt-4o` sent to OpenAI or `anthropic/claude-sonnet-4-5` to Anthropic: the prefix is ours,
   the provider is sent the name after it. On an OpenAI-compatible endpoint such a name is often the
   service's own id (OpenRouter's `openai/gpt-4o`, Together's and Vertex's `google/gemma-3-27b-it`,
   Groq's `openai/gpt-oss-20b`, a Hugging Face id on vLLM), and is served.
3. **Another lab's model on a native API**: Anthropic's routes serve Claude (`claude-`) models only,
   Gemini's no other lab's model (Gemini, Gemma, LearnLM..., also as `models/<name>`), OpenAI's own API and
   Mistral's serve no Claude or Gemini model and Mistral's no OpenAI model (`families` names each
   lab's; each API declares which it serves, `spec.ModelNames`). An OpenAI-compatible endpoint (vLLM, DashScope, a LiteLLM proxy, Anthropic's and
   Google's own OpenAI compatibility layers) may serve any name, and so does the simulated
   provider's OpenAI route, which `--provider simulated` sends every model through.
4. **A near miss of a known model**: a name no family row (but a catch-all) matches, one or two
   letters from a model the installed SDK lists (`openai.types.ChatModel`, `anthropic.types.Model`:
   Literal lists beside `str`) with the same version numbers: `gpt-4o-mnii`, `claude-sonet-4-6`. A
   name with other numbers is a version the list does not know yet (`claude-sonnet-4-7`), not a
   slip, and is served.

**Simulator names**: a name whose last part is `sim` (`gpt-sim`, `claude-sim`, `mistral-sim`,
`glm-sim`) or whose first part is (`sim-eval`) is a model of the simulated provider: never a near
miss, served on every OpenAI-compatible route and on its lab's own routes (`claude-sim` is a
`claude-` name, `gemini-sim` a Gemini one); like any name, not with our prefix left on
(`openai/gpt-sim`) and not on another lab's routes (`gpt-sim` on Anthropic's).
"""

from __future__ import annotations

import re
import typing
from functools import lru_cache

from lexpilot_batch.providers.bodies.families import first_family
from lexpilot_batch.providers.bodies.schema import edit_distance
from lexpilot_batch.providers.registry import APIS, PROVIDERS, api_spec
from lexpilot_batch.providers.spec import COMPATIBLE, OWN_ONLY

# Kinds of route a name is checked for, besides an API's own (its name): an OpenAI-compatible
# endpoint of unknown make (`spec.COMPATIBLE`), and the simulated provider's OpenAI route, which
# stands for every such endpoint (`--provider simulated` sends every model there). Both keep rule 1
# only: their model lists are their own, and `openai/...` or `google/...` may be their ids. A slip
# of an `openai/` or `anthropic/` model is refused by `prepare`, which knows where it goes, before
# anything is sent.
ANY = "any"
_SIM = re.compile(r"(?:.*-)?sim|sim-.*", re.IGNORECASE)
_NUMBERS = re.compile(r"\d+")


def is_simulator_name(model: str) -> bool:
    """Whether `model` names a model of the simulated provider (`gpt-sim`, `sim-eval`)."""
    return _SIM.fullmatch(model) is not None


def lab_of(model: str, *, also: bool = True) -> str | None:
    """The API whose model families name `model` (`claude-...` is Anthropic's), or None; with
    `also`, the names an API serves that no family row names too (Gemma's, the Gemini API's)."""
    for api in APIS.values():
        if first_family(api.families, model) is not None:
            return api.name
    if also:
        for api in APIS.values():
            if api.names is not None and api.names.also and re.fullmatch(api.names.also, model, re.IGNORECASE):
                return api.name
    return None


@lru_cache(maxsize=1)
def sdk_models() -> dict[str, frozenset[str]]:
    """The model names the installed SDKs list, per API (their `Literal` members)."""
    out: dict[str, frozenset[str]] = {}
    for api in APIS.values():
        if api.names is None or api.names.sdk_list is None:
            continue
        module, name = api.names.sdk_list
        try:
            tp = getattr(__import__(module, fromlist=[name]), name)
        except (ImportError, AttributeError):
            continue
        out[api.name] = frozenset(_literals(tp))
    return out


def _literals(tp: object) -> list[str]:
    if typing.get_origin(tp) is typing.Literal:
        return [a for a in typing.get_args(tp) if isinstance(a, str)]
    return [x for arg in typing.get_args(tp) for x in _literals(arg)]


def model_problem(route: str, model: object) -> str | None:
    """Why a route of kind `route` (an API's name, `COMPATIBLE` or `ANY`) cannot serve `model`, or
    None when it can (module docstring)."""
    if not isinstance(model, str) or not model.strip():
        return "no model name"
    if route in (COMPATIBLE, ANY):
        # Rule 1 only: on a compatible endpoint `google/gemma-3-27b-it` (Together, Vertex, a Hugging
        # Face id on vLLM) or `openai/gpt-4o` (OpenRouter) is the service's own id, not our prefix.
        return None
    head, sep, rest = model.partition("/")
    if sep and head in PROVIDERS and _known(rest):
        return f"{head}/ is lexpilot-batch's provider prefix, not part of the model's name: send {rest}"
    names = api_spec(route).names
    if names is None:
        return None
    if names.resource_prefix and model.startswith(names.resource_prefix):
        model = model[len(names.resource_prefix) :]  # the resource name's form, which the API takes too
    lab = lab_of(model)
    if names.serves == OWN_ONLY and lab != route:
        return f"{names.where} serves {names.own}{_elsewhere(lab, model)}"
    if lab is not None and lab != route:
        return f"{names.where} serves no {_lab_title(lab)} model{_elsewhere(lab, model)}"
    if names.sim_hint and lab is None and is_simulator_name(model):
        return f"{names.where} serves {names.sim_hint}"
    if is_simulator_name(model):
        return None
    near = near_miss(model, route)
    return f"no such model; did you mean {near}?" if near else None


def _lab_title(api: str) -> str:
    names = APIS[api].names
    return names.lab if names is not None and names.lab else api


def _home(api: str) -> str | None:
    """The provider prefix of an API's own endpoint, whose names are checked as its (`openai/`)."""
    return next((p.prefix for p in PROVIDERS.values() if p.api == api and p.names == api), None)


def _elsewhere(lab: str | None, model: str) -> str:
    if lab is None or (home := _home(lab)) is None:
        return ""
    return f"; {model} is {_lab_title(lab)}'s: send it as {home}/{model}"


def _known(name: str) -> bool:
    return lab_of(name) is not None or is_simulator_name(name) or any(name in names for names in sdk_models().values())


def near_miss(model: str, api: str) -> str | None:
    """The model of `api`'s SDK list that `model` is a slip of (rule 4), or None."""
    names = sdk_models().get(api, frozenset())
    if model in names or _specific(api, model):
        return None
    numbers = _NUMBERS.findall(model)
    best: tuple[int, str] | None = None
    for name in names:
        if _NUMBERS.findall(name) != numbers or abs(len(name) - len(model)) > 2:
            continue
        distance = edit_distance(model.lower(), name)
        if 0 < distance <= (1 if len(name) <= 5 else 2) and (best is None or (distance, name) < best):
            best = (distance, name)
    return best[1] if best else None


def _specific(api: str, model: str) -> bool:
    """Whether a family row of `api` other than its catch-all (`other Claude models`) names `model`."""
    family = first_family(APIS[api].families, model)
    return family is not None and not family.catch_all
