"""xAI's API shape: its Batch API (batches created empty, requests added to them, results paged) and chat completions."""
