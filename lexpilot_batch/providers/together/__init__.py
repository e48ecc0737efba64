"""Together AI's API shape: its Batch API (files with `purpose=batch-api`, batch jobs) and chat completions."""
