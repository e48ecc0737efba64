"""Fireworks AI's API shape: its batch inference jobs over datasets, and its chat completions."""
