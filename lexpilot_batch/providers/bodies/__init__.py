"""What a request body may hold: a role's body in its provider's dialect, pinned in the run's manifest
(`request`); the contract it is checked against before anything is compiled (`contract`), built
from the official SDKs' types (`schema`) and each model family's rules (`families`); and which model
names an API serves at all (`model_names`).
"""
