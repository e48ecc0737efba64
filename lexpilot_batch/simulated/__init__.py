"""The simulated provider: a loopback HTTP server speaking the OpenAI Files + Batches routes, and
Anthropic's Message Batches, Gemini's Batch Mode, Mistral's and Together AI's batch jobs on the
same port, with each API's synchronous call (chat completions, Messages, generateContent).

It lets the whole product, and every test, run offline through the real SDKs, with deterministic
simulated eval, user and judge models and switchable faults. Modules:

- `server`: the loopback-only `SimulatedServer` and `serve_forever`: finds a call's route,
  applies the per-call faults, answers
- `calls`: the calls a server answers, counted per route, and the per-call faults drawn for them
- `routes`: what an API declares (`SimulatedApi`: its `Route`s, each a handler of one `Request`,
  its error shape, overload status, base path)
- `apis`: one module per API, each declaring its routes (`openai`, `anthropic`, `gemini`,
  `mistral`, `together`), found by `apis` itself
- `profiles`: each OpenAI-compatible platform's documented differences (Groq, Zhipu, Qianfan,
  SiliconFlow, Moonshot, Ark), served under its own path (`SimulatedServer.profile_url`)
- `native`: what the native APIs' routes share: their batches are OpenAI-shaped ones
- `chat`: a synchronous call on any API, answered as a batch line
- `latency`: how long a batch and a synchronous call take
- `batches`: a simulated batch: its input checked (`validation`), its requests answered when it
  is created (`answers`, `run`), what a client sees of it over time (`lifecycle`)
- `completions`: chat.completion bodies with usage, truncation and malformed judge output
- `caching`: each provider's prompt-caching rule over the prefixes it has seen
- `roles`: the simulated roles, recognised from the prompt: what they read in it (`reading`), the
  evaluated model, the User Model and the judges (`evaluated`, `user_model`, `judges`), `respond`
- `faults`: the fault spec (`parse_faults`) and its deterministic dice
- `errors`: the error a route raises (`ApiError`)
- `store`: the persisted state folder

    with SimulatedServer(Path("sim-state"), parse_faults("line_error=0.05")) as server:
        client = OpenAI(base_url=server.base_url, api_key="anything")
"""

from __future__ import annotations

from lexpilot_batch.simulated.faults import Faults, FaultSpecError, parse_faults
from lexpilot_batch.simulated.server import SimulatedServer, serve_forever

__all__ = ["Faults", "FaultSpecError", "SimulatedServer", "parse_faults", "serve_forever"]
