"""Application Default Credentials for a Vertex run against the simulated provider: a service
account key file (google-auth's `service_account` type, a fresh RSA key) whose `token_uri` is the
simulated provider's OAuth token route, so that google-auth's own search (`google.auth.default`,
GOOGLE_APPLICATION_CREDENTIALS) and refresh run unmodified; and the bucket a run names."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

BUCKET = "lexpilot-test-bucket"


def service_account_file(folder: Path, root_url: str) -> Path:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()
    info = {
        "type": "service_account",
        "project_id": "lexpilot-test",
        "private_key_id": "0" * 40,
        "private_key": pem,
        "client_email": "runner@lexpilot-test.iam.gserviceaccount.com",
        "client_id": "1",
        "token_uri": root_url + "/token",
    }
    path = folder / "service-account.json"
    path.write_text(json.dumps(info), encoding="utf-8")
    return path


def point_vertex_at(monkeypatch: pytest.MonkeyPatch, folder: Path, root_url: str) -> None:
    """The variables a real Vertex run reads (besides its base URL), at the simulated provider: its
    credentials found by google-auth's own search (no access token of ours in the way)."""
    monkeypatch.delenv("GOOGLE_OAUTH_ACCESS_TOKEN", raising=False)
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(service_account_file(folder, root_url)))
    monkeypatch.setenv("GOOGLE_CLOUD_PROJECT", "lexpilot-test")
    monkeypatch.setenv("LEXPILOT_VERTEX_BUCKET", f"gs://{BUCKET}/runs")
    monkeypatch.setenv("GOOGLE_CLOUD_LOCATION", "europe-west4")
