"""How requests travel: each provider's declaration, and what every provider shares. Nothing here
knows a protocol or the workspace; the engine is where protocols and providers meet.

A provider declares itself once (`spec`): an API shape is a folder, an OpenAI-compatible platform
a file, and the registry finds them; shared code reads the declarations and never asks which
provider it has (docs/adding-a-provider.md).

| where | what |
| --- | --- |
| `spec` | the declarations: `ApiSpec` (an API shape), `Provider` (a prefix), `Limits` and the rest |
| `registry` | the declarations found and looked up: APIs, prefixes, limits profiles, a file's API |
| `openai/`, `anthropic/`, `google/`, `mistral/`, `together/` | one API shape each: `spec`, `lines`, `batch`, `results`, `errors`, `contract`, `chat` |
| `platforms/` | one OpenAI-compatible platform a file (`azure`, `dashscope`, `groq`, `moonshot`, ...) |
| `prefixes` | a model name read: its provider prefix, the name the provider is sent |
| `routing/` | where a request goes: `endpoints` (URL, key), `routes` (backend, endpoint, limits), `flex` |
| `bodies/` | what a body may hold: `request` (a role's body, pinned in the manifest), `contract` (the guard), `schema`, `families`, `model_names` |
| `lines`, `ids`, `cache_layout` | a request's batch line byte for byte, its custom_id, its layout for a prompt cache |
| `batch` | what the engine needs of a batch backend (`BatchBackend`): batch statuses, `BatchInfo`, the exceptions that tell lost answers apart |
| `file_batch` | the file-batch template every API's backend fills (`FileBatchBackend`), a result file streamed to disk |
| `sync/` | one request at a time: `call` (every API's synchronous call, `ChatCall`), `runner` (a file through it) |
| `results` | the one shape every result line is read as (an OpenAI batch output line) |
| `errors` | the one error policy of a failed provider call |
| `backends` | the backends a role's requests travel on (`batch`, `sync`, `manual`, `simulated`, `flex`) |
| `extras` | whether an optional SDK is installed and recent enough |
| `prices` | what tokens cost, the one cost formula |
"""
