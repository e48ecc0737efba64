"""The APIs the simulated provider speaks, one module each, found rather than listed: every module
here declares its `API` (`routes.SimulatedApi`: its routes, handlers, error shape, overload status,
base path), and nothing else names it. Adding an API is adding its module (docs/simulated.md).

- `openai`: the Files + Batches routes and chat completions, also under each OpenAI-compatible
  platform's path (`profiles`)
- `anthropic`: Message Batches and Messages
- `bedrock`: AWS Bedrock's batch inference jobs, InvokeModel and the S3 calls boto3 makes, under /bedrock
- `gemini`: Batch Mode, the File API's resumable upload and generateContent
- `mistral`: batch jobs, over OpenAI's files routes
- `openrouter`: OpenRouter's inline batches and chat completions, under /api/v1
- `together`: Together AI's files and batch jobs, under /together
- `fireworks`: Fireworks AI's datasets and batch inference jobs, under /fireworks
- `vertex`: Vertex AI's batch prediction jobs and the Cloud Storage JSON API its files go through
- `vertex_anthropic`: Claude on Vertex AI's `rawPredict` (its jobs are `vertex`'s, Claude's lines read there)
- `xai`: xAI's batches (created empty, requests added to them, results paged) and chat completions, under /xai/v1

The lookups below read the declarations: which route a call is for, and which API owns a path.
"""

from __future__ import annotations

import importlib
import pkgutil
from typing import Any
from urllib.parse import unquote

from lexpilot_batch.providers.registry import BARE
from lexpilot_batch.simulated.errors import ApiError
from lexpilot_batch.simulated.profiles import Profile
from lexpilot_batch.simulated.routes import Route, SimulatedApi


def _collect() -> tuple[SimulatedApi[Any], ...]:
    found = [importlib.import_module(f"{__name__}.{info.name}").API for info in pkgutil.iter_modules(__path__)]
    # The bare API's shape (OpenAI's) first, then by name: the order `http_routes` lists routes in.
    return tuple(sorted(found, key=lambda api: (api.spec != BARE.name, api.name)))


APIS = _collect()
# Every route with its API, in the order declared.
ROUTES: tuple[tuple[SimulatedApi[Any], Route[Any]], ...] = tuple((api, route) for api in APIS for route in api.routes)
# The routes' names, as `http_routes=` takes them (`faults`).
ROUTE_NAMES: tuple[str, ...] = tuple(dict.fromkeys(route.name for _, route in ROUTES))


def find(
    method: str, path: str, profile: Profile | None, headers: Any = None
) -> tuple[SimulatedApi[Any], Route[Any], tuple[str, ...]]:
    """The API and route a call is for, and its path's arguments; 405 for a path of another
    method, 404 for one no route has. Under a platform's path (`profile`) only the routes of the
    APIs it serves count, and only the chat routes of a platform without batches (Ark). A route
    marked with a header (`Route.header`) is the call's first when the call carries it, and not
    the call's otherwise."""
    allowed = False
    marked = [(a, r) for a, r in ROUTES if r.header is not None and headers is not None and r.header in headers]
    for api, route in [*marked, *((a, r) for a, r in ROUTES if r.header is None)]:
        if profile is not None and not (api.platforms and (profile.batches or route.chat)):
            continue
        match = route.pattern.fullmatch(path)
        if match:
            if route.method == method:
                return api, route, tuple(unquote(g) for g in match.groups())
            allowed = True
    if allowed:
        raise ApiError(405, f"Method {method} is not allowed on {path}.", code="method_not_allowed")
    raise ApiError(404, f"Invalid URL ({method} {path})", param=None, code=None)


def owner(path: str) -> SimulatedApi[Any]:
    """The API whose paths `path` is among (its longest prefix): whose error shape answers it."""
    return max(APIS, key=lambda api: max((len(p) for p in api.prefixes if path.startswith(p)), default=-1))


def native(spec: str) -> SimulatedApi[Any] | None:
    """The simulated API doubling the product's API shape `spec`, where it has a base URL of its own."""
    return next((api for api in APIS if api.spec == spec and api.base_path is not None), None)
