"""Where a Vertex batch goes and who sends it: the Google Cloud project, location and Cloud Storage
bucket, from the environment, and the credentials, Application Default Credentials
(`google.auth.default`), never read from or written to any file of ours (docs/providers.md#vertex-ai
says how to set each, step by step).

| what | from | default |
| --- | --- | --- |
| credentials | Application Default Credentials (google-auth's search); an access token in `GOOGLE_OAUTH_ACCESS_TOKEN` (the provider's key variable: `gcloud auth print-access-token`, an hour's worth) instead where it is set | |
| project | `GOOGLE_CLOUD_PROJECT` (the variable google-genai reads) | none |
| location | `GOOGLE_CLOUD_LOCATION` (google-genai's too) | `global` (google-genai's default; batch prediction is served there) |
| bucket | `LEXPILOT_VERTEX_BUCKET`: `my-bucket` or `gs://my-bucket/some/prefix` | none |
| endpoint | `GOOGLE_VERTEX_BASE_URL`: unset, google-genai picks the location's own (`https://{location}-aiplatform.googleapis.com`); set (a proxy, the simulated provider), Vertex's and Cloud Storage's calls both go there | |

A rehearsal (`--provider simulated`) names a project, location and bucket of its own and sends a
fixed token: no credentials are looked for.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from lexpilot_batch.errors import ConfigError
from lexpilot_batch.providers.backends import SIMULATED
from lexpilot_batch.providers.routing.endpoints import Endpoint
from lexpilot_batch.providers.vertex import gcs
from lexpilot_batch.util.redaction import register_secret

DEFAULT_URL = "https://aiplatform.googleapis.com"  # the provider's default: the location decides
BUCKET_VAR = "LEXPILOT_VERTEX_BUCKET"
PROJECT_VAR = "GOOGLE_CLOUD_PROJECT"
LOCATION_VAR = "GOOGLE_CLOUD_LOCATION"
SCOPES = ("https://www.googleapis.com/auth/cloud-platform",)
# A rehearsal's own: no such project exists.
SIMULATED_PROJECT, SIMULATED_LOCATION, SIMULATED_BUCKET = "lexpilot-simulated", "us-central1", "lexpilot-simulated"
SIMULATED_TOKEN = "simulated-key"


@dataclass(frozen=True)
class Settings:
    project: str
    location: str
    bucket: str
    prefix: str  # inside the bucket, "" or ending with "/"
    vertex_url: str | None  # None: google-genai's own for the location
    storage_url: str


def settings_of(endpoint: Endpoint, environ: Mapping[str, str] | None = None) -> Settings:
    """The endpoint's project, location, bucket and URLs; a `ConfigError` saying what to set."""
    env = os.environ if environ is None else environ
    if endpoint.backend == SIMULATED:
        return Settings(
            SIMULATED_PROJECT, SIMULATED_LOCATION, SIMULATED_BUCKET, "", endpoint.base_url, endpoint.base_url
        )
    project = (env.get(PROJECT_VAR) or "").strip()
    if not project:
        raise ConfigError(
            f"no Google Cloud project for the {endpoint.where}: set {PROJECT_VAR} to the project the jobs "
            "run and are billed in (docs/providers.md#vertex-ai)"
        )
    location = env.get(LOCATION_VAR) or "global"
    where = env.get(BUCKET_VAR) or ""
    if not where.strip():
        raise ConfigError(
            f"no Cloud Storage bucket for the {endpoint.where}: set {BUCKET_VAR} to a bucket the Vertex AI "
            "service agent can read and write (my-bucket, or gs://my-bucket/prefix); see docs/providers.md#vertex-ai"
        )
    bucket, _, prefix = where.strip().removeprefix("gs://").partition("/")
    prefix = prefix.strip("/")
    custom = endpoint.base_url.rstrip("/") != DEFAULT_URL
    return Settings(
        project,
        location,
        bucket,
        prefix + "/" if prefix else "",
        endpoint.base_url if custom else None,
        endpoint.base_url if custom else gcs.DEFAULT_URL,
    )


def credentials(endpoint: Endpoint, environ: Mapping[str, str] | None = None) -> Any:
    """Application Default Credentials (google-auth's search: GOOGLE_APPLICATION_CREDENTIALS, the
    gcloud CLI's application-default login, the metadata server); the access token of the
    endpoint's key variable where it is set (registered for redaction, never refreshed); a fixed
    token in a rehearsal."""
    env = os.environ if environ is None else environ
    if endpoint.backend == SIMULATED:
        from google.oauth2.credentials import Credentials

        return Credentials(token=SIMULATED_TOKEN)
    token = (env.get(endpoint.key_var) or "").strip()
    if token:
        from google.oauth2.credentials import Credentials

        register_secret(endpoint.key_var, token)
        return Credentials(token=token)
    import google.auth
    from google.auth.exceptions import DefaultCredentialsError

    try:
        found, _project = google.auth.default(scopes=list(SCOPES))
    except DefaultCredentialsError:
        raise ConfigError(
            f"no Google Cloud credentials for the {endpoint.where}: run `gcloud auth application-default "
            "login`, or set GOOGLE_APPLICATION_CREDENTIALS to a service account's key file "
            "(docs/providers.md#vertex-ai)"
        ) from None
    return found
