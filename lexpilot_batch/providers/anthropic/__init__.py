"""Anthropic's API shape: Message Batches and Messages (the `anthropic` SDK, an optional extra)."""
