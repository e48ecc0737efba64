"""Which model names a provider serves: the rules `prepare` keeps before anything is compiled, so
that a mistyped model fails at once, with one line saying why and what to pass instead. (The
simulated provider keeps its own reading of the providers' lists, `simulated.sources.names`: a mistake
here is not repeated there.)

The real APIs answer a model they do not serve with their own error: OpenAI 404
`invalid_request_error` / `model_not_found` ("The model `x` does not exist or you do not have
access to it"); Anthropic 404 `not_found_error` ("model: x"; in a Message Batch, that request's
result is `errored`); Gemini 404 `NOT_FOUND` ("models/x is not found for API version v1beta, or is
not supported for generateContent"); Mistral 400 `invalid_model` ("Invalid model: x", code 1500).
Which names those are:

1. **No name**: an empty or blank `model`.
2. **Our prefix left on**, on a lab's own API: a name that still starts with one of our provider
   prefixes (`registry.PROVIDERS`) followed by a name that provider knows, such as `openai/gpt-4o`
   sent to OpenAI: the prefix is ours, the provider is sent the name after it. On an
   OpenAI-compatible endpoint such a name is often the service's own id (OpenRouter's
   `openai/gpt-4o`, Together's `google/gemma-3-27b-it`, Groq's `openai/gpt-oss-20b`), and is served.
3. **Another lab's model on a native API**: Anthropic's routes serve Claude (`claude-`) models only,
   Gemini's no other lab's model, OpenAI's own API and Mistral's no Claude or Gemini model
   (`families` names each lab's; each API declares which it serves, `spec.ModelNames`).
4. **Not in the provider's catalogue** (`spec.Catalogue`: its installed SDK's own list and a
   bundled list with its source and date): any other name is refused, a near miss of a listed one
   named ("did you mean ...?"). A family pattern alone no longer makes a name known:
   `claude-sonet-4-5` matched a Claude row and passed, and the API answered 404. A model newer than
   the catalogue is named with `--allow-model NAME`, after a check against the provider's live
   listing (`lexpilot-batch preflight`, `engine.preflight`). A provider without a catalogue (an Azure deployment, an
   Ark endpoint id, an `openai-api/` service, an aggregator's hundreds of models) keeps rule 1.

**Simulator names**: a name whose last part is `sim` (`gpt-sim`, `claude-sim`, `glm-sim`) or whose
first part is (`sim-eval`) is a model of the simulated provider, never a real one: rule 4 lets it
through, rules 2 and 3 do not (`openai/gpt-sim`, `gpt-sim` on Anthropic's routes).
"""

from __future__ import annotations

import importlib
import re
import typing
from difflib import SequenceMatcher
from functools import cache

from lexpilot_batch.providers.bodies.families import first_family
from lexpilot_batch.providers.bodies.schema import edit_distance
from lexpilot_batch.providers.registry import APIS, PROVIDERS, api_spec
from lexpilot_batch.providers.spec import COMPATIBLE, OWN_ONLY, Catalogue, Provider

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


def _literals(tp: object) -> list[str]:
    if typing.get_origin(tp) is typing.Literal:
        return [a for a in typing.get_args(tp) if isinstance(a, str)]
    return [x for arg in typing.get_args(tp) for x in _literals(arg)]


@cache
def sdk_names(module: str, attribute: str, field: str | None) -> frozenset[str]:
    """The names an installed SDK lists (a `Literal` beside `str`, or a request type's field of
    one); none when the SDK is not installed or no longer has the type."""
    try:
        found = getattr(importlib.import_module(module), attribute)
        if field is not None:
            found = typing.get_type_hints(found)[field]
    except (ImportError, AttributeError, KeyError, NameError, TypeError):
        return frozenset()
    return frozenset(_literals(found))


def catalogue_names(catalogue: Catalogue) -> frozenset[str]:
    """Every name a catalogue holds: its bundled names and its installed SDK's."""
    return catalogue.names | (sdk_names(*catalogue.sdk) if catalogue.sdk else frozenset())


def model_problem(route: str, model: object) -> str | None:
    """Why a route of kind `route` (an API's name, or `COMPATIBLE`) cannot serve `model` by rules
    1 to 3, or None (module docstring)."""
    if not isinstance(model, str) or not model.strip():
        return "no model name"
    if route == COMPATIBLE:
        return None
    head, sep, rest = model.partition("/")
    if sep and head in PROVIDERS and _known(PROVIDERS[head], rest):
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
    return None


def catalogue_problem(provider: Provider, model: str) -> str | None:
    """Why `provider` does not serve `model` by rule 4 (its catalogue), or None: listed, a
    simulator name, or a provider without a catalogue (or whose catalogue is its SDK's list alone,
    and that SDK is not installed: Groq's)."""
    catalogue = provider.catalogue
    if catalogue is None or is_simulator_name(model):
        return None
    names = api_spec(provider.api).names
    if names is not None and names.resource_prefix and model.startswith(names.resource_prefix):
        model = model[len(names.resource_prefix) :]
    known = catalogue_names(catalogue)
    if model in known or not known:  # (none: its SDK, the list's only source, is not installed)
        return None
    near = near_miss(model, known)
    guess = f" (did you mean {near}?)" if near else ""
    return f"not in the model catalogue of {provider.title} ({catalogue.source}; {catalogue.taken}){guess}"


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


def _known(provider: Provider, name: str) -> bool:
    """Whether `name` is a model `provider` knows: in its catalogue, or of a family its API names."""
    if provider.catalogue is not None and name in catalogue_names(provider.catalogue):
        return True
    return first_family(api_spec(provider.api).families, name) is not None or is_simulator_name(name)


def near_miss(model: str, names: frozenset[str]) -> str | None:
    """The name of `names` that `model` is a slip of: one or two letters off (one in a short name),
    with the same version numbers (`claude-sonet-4-5`, `gemini-2.5-flsh`), or the same name in
    another case; None when none is."""
    numbers = _NUMBERS.findall(model)
    best: tuple[int, str] | None = None
    for name in names:
        if name.lower() == model.lower():
            return name
        if _NUMBERS.findall(name) != numbers or abs(len(name) - len(model)) > 2:
            continue
        distance = edit_distance(model.lower(), name.lower())
        if 0 < distance <= (1 if len(name) <= 5 else 2) and (best is None or (distance, name) < best):
            best = (distance, name)
    return best[1] if best else None


def providers_serving(model: str, limit: int = 3) -> list[str]:
    """How `model`, a bare name, could be named with a provider whose catalogue lists it or a name
    of the same maker (`DeepSeek-R1`: `deepseek/deepseek-reasoner`, ...): `prefix/name` each, the
    exact names first, then the closest."""
    lowered = model.lower()
    maker = re.split(r"[-_.:/]", lowered)[0]
    exact, alike = [], []
    for provider in PROVIDERS.values():
        if provider.catalogue is None:
            continue
        for name in sorted(catalogue_names(provider.catalogue)):
            if name.lower() == lowered:
                exact.append(f"{provider.prefix}/{name}")
            elif maker and name.lower().startswith(maker):
                alike.append(f"{provider.prefix}/{name}")
    # A name whose part after the maker starts as the model's does first (`DeepSeek-R1`: `deepseek-reasoner`
    # before `deepseek-chat`), then by likeness.
    rest = lowered[len(maker) :].lstrip("-_.:/")[:1]

    def order(named: str) -> tuple[bool, float]:
        name = named.partition("/")[2].lower()
        starts = bool(rest) and name[len(maker) :].lstrip("-_.:/").startswith(rest)
        return not starts, -SequenceMatcher(None, lowered, name).ratio()

    alike.sort(key=order)
    return (exact + alike)[:limit]
