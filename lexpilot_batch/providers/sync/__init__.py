"""Requests sent one at a time: each API's synchronous call (`call`: the template every API's call
fills, `ChatCall`, and what each outcome means), and the runner that sends a compiled request file
through it, for the `sync` backend, `--tail-sync` and the flex tier (`runner`: `SyncRunner`; the
lines it reads and appends, `lines`), a pass's files at once on one event loop (`at_once`), each
model's calls in flight in its adaptive `window`.
"""
