"""Mistral's API shape: its Batch API (files with `purpose=batch`, batch jobs) and chat completions."""
