"""What the providers publish, as the simulated provider reads it for itself: the request types of
their official SDKs, the documented fields and limits the SDKs do not type, and the model lists
they publish. Nothing here comes from `lexpilot_batch.providers`: a rule the product gets wrong is
then not wrong on this side too, and a rehearsal can show it.

- `typed`: a JSON body checked against an SDK's request type (a `TypedDict`, closed or not, or a
  pydantic model), in the SDK's own terms
- `requests`: each API's request types and documented extras: OpenAI's batch create and chat
  completions, Anthropic's Messages, Gemini's GenerateContentRequest, Mistral's and OpenRouter's
  chat completions,
  Ark's batch chat, each platform's batch create
- `names`: the model names each API serves, from its SDK's own list and the lists its maker
  publishes (`published`, each list with its source and date), and the near misses of them

What the simulated provider still imports from `lexpilot_batch.providers` validates nothing: the
names of the APIs (`<api>.spec.NAME`, `registry.BARE`: which routes are which, and the endpoint
`simulated/<api>` a rehearsal's files name) and lexpilot-batch's own request ids, read back so
that a request draws the same answer on every route (`ids.id_stem`, `ids.TAG_LENGTH`,
`lines.our_id` and `lines.line_id`: Anthropic's mapped custom_ids, which its API defines only as
`^[a-zA-Z0-9_-]{1,64}$`; an id the mapping did not make draws by itself and is never refused).
"""
