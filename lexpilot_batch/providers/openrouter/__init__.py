"""OpenRouter's API shape: its Batch API (inline requests, batches without metadata) and chat completions."""
