"""What a provider declares about itself, once; the registry (`providers.registry`) collects the
declarations, and every shared module reads them instead of asking which provider it has.

Two kinds of declaration:

- **`ApiSpec`**, an API shape: the wire format of batch lines, of results and of the synchronous
  call, and the classes that speak it. One per folder `providers/<api>/`, in its `spec.py`:
  `openai` (Files + Batches and Chat Completions, copied by most providers), `anthropic` (Message
  Batches), `google` (Gemini Batch Mode), `mistral` (batch jobs), `together` (Together AI's jobs).
- **`Provider`**, a provider prefix (`openai/`, `dashscope/`): where its requests go (endpoint,
  key variable, backend), within which limits, in which body dialect and under which rules, over
  one API shape. A native API's providers are declared in its folder's `spec.py`; an
  OpenAI-compatible platform is one file of `providers/platforms/` holding its `PROVIDER`.

docs/adding-a-provider.md is the recipe. Nothing here imports a provider's folder: the classes and
SDKs an API needs are loaded when first used (`ApiSpec.load`), so that compiling needs no SDK.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from lexpilot_batch.errors import ConfigError
from lexpilot_batch.providers.bodies.families import Family
from lexpilot_batch.providers.bodies.schema import Problem
from lexpilot_batch.providers.results import Normalise
from lexpilot_batch.util.extras import require, requirement_problem

if TYPE_CHECKING:
    from lexpilot_batch.providers.batch import BatchBackend
    from lexpilot_batch.providers.sync.call import ChatCall

# A documented "MB" read as the smaller of its two readings, 10^6 bytes: a file cut 4.9% short of a
# limit the provider meant in MiB costs nothing, one over a limit it meant in decimal megabytes is
# refused whole (and Anthropic's request body, the file's lines in a JSON array, is a few bytes
# longer than the file whose size is checked).
MB = 1_000_000


@dataclass(frozen=True)
class Limits:
    """How a provider wants its batch files cut and its batches created."""

    max_requests: int = 50_000
    max_bytes: int = 200 * MB
    completion_window: str = "24h"
    endpoint: str = "/v1/chat/completions"  # the path each line names (OpenAI's shape), or the batch route
    # Enqueued input tokens one model may have waiting in batches (`engine.budgets`); None: no
    # budget unless the workspace is told one (--max-enqueued-tokens) or learns one from a refusal.
    enqueued_tokens: int | None = None
    # Seconds after which the provider should delete an uploaded file and a batch's output files
    # (`expires_after`, `output_expires_after`); None: not sent (the provider's default).
    file_expiry: int | None = None
    # Whether files the workspace uploaded, and its batches' output files, are deleted at the
    # provider once their results are saved and ingested (`--keep-provider-files` keeps them).
    delete_files: bool = False
    # The fewest requests one batch may hold (AWS Bedrock's "Minimum number of records per batch
    # inference job"): a smaller group of a wave goes through the synchronous call instead, where
    # the provider has one (`engine.tail.wave_backend`).
    min_requests: int = 1


@dataclass(frozen=True)
class LineShape:
    """A batch input line of an API, for `providers.lines` to frame and `bodies.contract` to check.

    `empty(model, url, fields)` is the line with an empty id and an empty prompt, whose prompt's
    place in its JSON is `slot`; the id is the line's first field, `id_key`."""

    id_key: str
    slot: str
    empty: Callable[[str, str, dict[str, Any]], dict[str, Any]]
    body_key: str  # the field holding the request ("body", "params", "request")
    keys: frozenset[str]  # every field a line may hold
    id_pattern: re.Pattern[str] | None = None  # what an id must match, where the API says
    method_url: bool = False  # OpenAI's: `"method": "POST"` and the chat `url` it is sent to ...
    urls: frozenset[str] = frozenset()  # ... one of these


@dataclass(frozen=True)
class Dialect:
    """A request body's fields besides the model and the prompt, in one provider's dialect
    (`bodies.request`): `body(model, temperature, max_tokens, reasoning_effort, reasoning)`,
    the settings a body carries (`sent`: its temperature and its output-token limits), and a
    per-model argument that merges into the body rather than replacing a field (`merge`)."""

    name: str
    body: Callable[[str, float | None, int | None, str | None, bool | None], dict[str, Any]]
    sent: Callable[[Mapping[str, Any]], tuple[Any, tuple[Any, ...]]]
    merge: Callable[[dict[str, Any], str, Any], bool] = lambda fields, key, value: False


# How an API's own routes serve model names of other labs (`bodies.model_names`).
OWN_ONLY = "own only"  # its lab's models and nothing else (Anthropic's: Claude only)
NO_OTHER_LAB = "no other lab"  # any name but another lab's models (OpenAI's, Gemini's, Mistral's)


@dataclass(frozen=True)
class ModelNames:
    """Which model names an API's own routes serve (`bodies.model_names`, where the rules are)."""

    where: str  # the API as messages name it: "OpenAI's API"
    serves: str = NO_OTHER_LAB
    lab: str | None = None  # the lab its model families are, as messages name it ("Anthropic")
    own: str = ""  # what it serves, for a refusal of a name it does not ("Claude models only (claude-...)")
    sim_hint: str = ""  # a simulator name no family of its own matches is refused, saying this
    resource_prefix: str = ""  # a prefix its API takes before a name (Gemini's `models/`)
    also: str | None = None  # a pattern of names its lab serves that no family row names (Gemma)


@dataclass(frozen=True)
class Catalogue:
    """The model names a provider's endpoint serves, as far as an offline check can know them
    (`bodies.model_names`): the installed SDK's own list, where its types carry one (`sdk`: module,
    attribute and, for a request type, its field: a `Literal` beside `str`), and names bundled
    from a published list (`names`), each list with where it was read (`source`) and when
    (`taken`, ISO). A name in neither is refused unless the command allows it (`--allow-model`):
    a model newer than both, to be checked against the provider's live listing first."""

    source: str
    taken: str
    names: frozenset[str] = frozenset()
    sdk: tuple[str, str, str | None] | None = None


@dataclass(frozen=True)
class FlexTier:
    """An API's flex tier (`routing.flex`): synchronous calls at batch prices."""

    field: str  # the request field asking for it (`service_tier`, `serviceTier`)
    models: tuple[tuple[str, str], ...]  # (pattern over the name as sent, source) of the models taking it


@dataclass(frozen=True)
class Extra:
    """An optional SDK an API's calls need: its module, the extra installing it, and the provider
    as messages name it (`util.extras`)."""

    module: str
    extra: str
    title: str

    def problem(self) -> str | None:
        """What to install, when the SDK is missing or too old; None when it is fine (looked up, not imported)."""
        return requirement_problem(self.module, self.extra, f"{self.title} requests")

    def require(self, module: str | None = None) -> Any:
        """Import the SDK (or one of its modules), or say what installs it."""
        return require(module or self.module, self.extra, f"{self.title} requests", ConfigError)


# A contract: what an API (or a provider of it) refuses in a request body (`bodies.contract`):
# (model as sent, body, first party, reasoning) -> the problems.
Contract = Callable[[str, Mapping[str, Any], bool, "bool | None"], list[Problem]]


def _same(line_id: str, tag: str | None = None) -> str:
    return line_id


def _none(tag: str) -> Normalise | None:
    return None


@dataclass(frozen=True)
class ApiSpec:
    """An API shape (module docstring)."""

    name: str
    lines: LineShape
    contract: Contract
    # A role's body as every line of it is sent, with a placeholder message: (model, fields) -> body.
    sample_body: Callable[[str, Mapping[str, Any]], dict[str, Any]]
    # Its batch backend and synchronous call classes, imported when first used (their SDKs may be extras).
    load: Callable[[], tuple[type[BatchBackend], type[ChatCall]]]
    dialect: Dialect  # the body dialect of its providers, unless one declares its own
    read_results: Callable[[str], Normalise | None] = _none  # (workspace tag) -> how its result lines read
    line_id: Callable[[str, str], str] = _same  # a custom_id as its lines carry it (tag); `our_id` reverses it
    our_id: Callable[[str, str | None], str | None] = _same
    families: tuple[Family, ...] = ()  # its model families' rules, most specific first (`bodies.families`)
    names: ModelNames | None = None  # which model names its own routes serve; None: any
    flex: FlexTier | None = None
    extra: Extra | None = None
    openai_lines: bool = False  # its lines are OpenAI's batch lines, which vLLM and consoles run (`manual`)
    simulated_native: bool = False  # the simulated provider speaks it on its own routes (`simulated/<api>`)
    chat_names_model: bool = False  # its synchronous call names the model, which its lines do not (Gemini)
    bare: bool = False  # a model name without a prefix speaks it (OpenAI's shape)


# How a provider's model names are checked (`bodies.model_names`): its API's own list and rules, or
# those of an OpenAI-compatible endpoint of unknown make, whose model list is its own.
COMPATIBLE = "compatible"

# A provider's flex tier (`routing.flex`): none; its API's listed models, where its endpoint is the
# provider's own (`HOME`) or anywhere (`LISTED`); only when `--flex MODEL=on` forces it.
NO_FLEX, LISTED, HOME, FORCED = "none", "listed", "home", "forced"


@dataclass(frozen=True)
class Provider:
    """One provider prefix and everything it decides (module docstring)."""

    prefix: str
    title: str
    api: str  # the `ApiSpec.name` its requests speak
    base_url: str | None  # the default endpoint; None: it must be set (`url_var`)
    url_var: str  # overrides the endpoint; `{SERVICE}` is the service of openai-api/<service>/
    key_var: str  # the variable holding the API key
    backend: str = "batch"  # the default: batch where the provider has a Batch API, sync where not
    batch_api: bool = True
    limits: Limits | None = None  # its profile (named by its prefix); None: guessed from the base URL
    hosts: tuple[str, ...] = ()  # fragments of its endpoints' URLs: a bare name's URL set by hand
    dialect: Dialect | None = None  # None: its API's
    contract: Contract | None = None  # its own contract, in place of its API's
    first_party: bool = False  # its API's owner: unknown fields refused, model families' rules kept
    names: str = COMPATIBLE  # `COMPATIBLE`, or its API's name: model names checked against that API's
    flex: str = NO_FLEX
    cache: Callable[[str], str | None] | None = None  # (model as sent) -> its lines' cache layout
    chat_api: bool = True  # the endpoint of its batches also answers synchronous calls (`--tail-sync`)
    # The body field its models' thinking is switched with (`--model-arg`), and an example of it;
    # "" where the provider documents none. Another provider's switch is refused (`bodies.request`).
    thinking: str = ""
    thinking_example: str = ""
    url_example: str = ""  # a base URL's shape, for a provider without a default endpoint
    # How long one synchronous request may wait, and how often it is sent again, where the
    # provider's own SDK keeps a longer policy than the command's `--timeout` (Ark's batch chat
    # route queues a request until its deadline): None, the command's (`registry.chat_policy`).
    chat_timeout: float | None = None
    chat_retries: int | None = None
    # The model names it serves (`Catalogue`); None: names of the user's own (an Azure deployment,
    # an Ark endpoint id, an `openai-api/` service) or a catalogue no offline list can keep (an
    # aggregator's hundreds of models): its names are checked by the provider alone.
    catalogue: Catalogue | None = None
    generic: bool = False  # openai-api/<service>/<model>: the service names its variables
    # Its SDK finds its credentials itself (boto3's default chain: AWS Bedrock): no key variable is
    # asked for, and `key_var` only names where they come from in messages.
    keyless: bool = False
    ready: bool = True  # False: reserved for a later version

    @property
    def profile(self) -> str | None:
        """The limits profile it keeps (`registry.PROFILES`); None: guessed from the base URL."""
        return self.prefix if self.limits is not None else None

    def url_var_for(self, service: str | None) -> str:
        return self.url_var.replace("{SERVICE}", env_name(service or ""))

    def key_var_for(self, service: str | None) -> str:
        return self.key_var.replace("{SERVICE}", env_name(service or ""))


def env_name(service: str) -> str:
    """A service's name as it appears in environment variables: `my-svc` -> `MY_SVC`."""
    return service.upper().replace("-", "_")
