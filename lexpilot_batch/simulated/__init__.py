"""The simulated provider: a loopback HTTP server speaking the OpenAI Files + Batches routes, and
Anthropic's Message Batches and Gemini's Batch Mode on the same port, with each API's synchronous
call (chat completions, Messages, generateContent).

It lets the whole product, and every test, run offline through the real `openai`, `anthropic`
and `google-genai` SDKs, with deterministic simulated eval, user and judge models and switchable
faults. Modules:

- `server`: HTTP routing, the loopback-only `SimulatedServer`, `serve_forever`
- `profiles`: each OpenAI-compatible platform's documented differences (Groq, Zhipu, Qianfan,
  SiliconFlow, Moonshot, Ark), served under its own path (`SimulatedServer.profile_url`)
- `api`: what each OpenAI route does; `anthropic_api`, `gemini_api` the native APIs' routes, over
  the same batches (`native`); `chat` a synchronous call on any API, answered as a batch line
- `latency`: how long a batch and a synchronous call take
- `batches`: input validation, the simulated run, the batch lifecycle over time
- `completions`: chat.completion bodies with usage, truncation and malformed judge output
- `roles`: the simulated roles, recognised from the prompt
- `faults`: the fault spec (`parse_faults`) and its deterministic dice
- `store`: the persisted state folder

    with SimulatedServer(Path("sim-state"), parse_faults("line_error=0.05")) as server:
        client = OpenAI(base_url=server.base_url, api_key="anything")
"""

from __future__ import annotations

from lexpilot_batch.simulated.faults import Faults, FaultSpecError, parse_faults
from lexpilot_batch.simulated.server import SimulatedServer, serve_forever

__all__ = ["Faults", "FaultSpecError", "SimulatedServer", "parse_faults", "serve_forever"]
