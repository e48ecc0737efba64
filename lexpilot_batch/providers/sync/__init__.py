"""Requests sent one at a time: each API's synchronous call (`call`: the template every API's call
fills, `ChatCall`, and what each outcome means), and the runner that sends a compiled request file
through it, for the `sync` backend, `--tail-sync` and the flex tier (`runner`: `SyncRunner`).
"""
