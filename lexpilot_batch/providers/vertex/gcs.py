"""The three Cloud Storage calls a Vertex batch needs, through the Cloud Storage JSON API
(https://cloud.google.com/storage/docs/json_api/v1/objects) over google-auth's `AuthorizedSession`
(`requests`, which `google-genai` installs): a simple upload (`POST
/upload/storage/v1/b/{bucket}/o?uploadType=media&name=...`), a listing by prefix (`GET
/storage/v1/b/{bucket}/o?prefix=...`, pages by `pageToken`) and an object's bytes (`GET
/storage/v1/b/{bucket}/o/{object}?alt=media`, streamed).

Not `google-cloud-storage`: its client brings google-api-core, google-cloud-core,
google-resumable-media, google-crc32c and protobuf for these three calls. Its own tests of the
simulated routes drive the same paths (tests/providers/vertex/).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, BinaryIO
from urllib.parse import quote

DEFAULT_URL = "https://storage.googleapis.com"  # the JSON API's endpoint
CHUNK = 1 << 20


class GcsError(Exception):
    """A Cloud Storage answer other than 2xx: its status and message (`{"error": {code, message}}`)."""

    def __init__(self, status: int, message: str, response: Any = None) -> None:
        super().__init__(f"{message} (HTTP {status})")
        self.status, self.message, self.response = status, message, response


@dataclass(frozen=True)
class GcsObject:
    name: str
    size: int
    md5: str | None  # base64 MD5 of its bytes (`md5Hash`), where Cloud Storage gives one


def split(uri: str) -> tuple[str, str]:
    """(bucket, object name) of a `gs://bucket/name` URI."""
    if not uri.startswith("gs://"):
        raise ValueError(f"not a Cloud Storage URI: {uri!r}")
    bucket, _, name = uri[len("gs://") :].partition("/")
    return bucket, name


class Gcs:
    """Cloud Storage's JSON API at `base_url` through `session` (an `AuthorizedSession`)."""

    def __init__(self, session: Any, base_url: str, timeout: float) -> None:
        self.session, self.base, self.timeout = session, base_url.rstrip("/"), timeout

    def _check(self, response: Any) -> Any:
        if response.status_code // 100 == 2:
            return response
        try:
            message = response.json()["error"]["message"]
        except Exception:
            message = (response.text or "")[:200] or response.reason or "no message"
        raise GcsError(response.status_code, str(message), response)

    def upload(self, bucket: str, name: str, data: bytes | BinaryIO) -> str:
        """Store `data` (bytes, or an open file, streamed) as `name` in `bucket`; its `gs://` URI."""
        url = f"{self.base}/upload/storage/v1/b/{quote(bucket, safe='')}/o"
        params = {"uploadType": "media", "name": name}
        headers = {"Content-Type": "application/jsonl"}
        self._check(self.session.post(url, params=params, data=data, headers=headers, timeout=self.timeout))
        return f"gs://{bucket}/{name}"

    def objects(self, bucket: str, prefix: str) -> Iterator[GcsObject]:
        """Every object whose name starts with `prefix`, page after page."""
        url = f"{self.base}/storage/v1/b/{quote(bucket, safe='')}/o"
        token: str | None = None
        while True:
            params = {"prefix": prefix, **({"pageToken": token} if token else {})}
            page = self._check(self.session.get(url, params=params, timeout=self.timeout)).json()
            for item in page.get("items") or []:
                yield GcsObject(str(item["name"]), int(item.get("size") or 0), item.get("md5Hash"))
            token = page.get("nextPageToken")
            if not token:
                return

    def chunks(self, bucket: str, name: str) -> Iterator[bytes]:
        """An object's bytes, a megabyte at a time (a broken-off body raises the transport's error)."""
        url = f"{self.base}/storage/v1/b/{quote(bucket, safe='')}/o/{quote(name, safe='')}"
        with self.session.get(url, params={"alt": "media"}, stream=True, timeout=self.timeout) as response:
            self._check(response)
            yield from response.iter_content(CHUNK)
