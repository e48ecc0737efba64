"""The benchmark itself, pure: its roles and generation settings, every prompt, the judges' answers,
the protocols (one per-case state machine per task), the records they make, the tasks and metrics.
Nothing here knows of batches, providers or the workspace.
"""
