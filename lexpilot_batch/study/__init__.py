"""A study before it runs: registering runs with their manifests and threads, the lineup of models
(what each role's requests carry and where they go), model lists and per-model arguments.
"""
