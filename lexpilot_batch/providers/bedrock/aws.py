"""The boto3 clients of a `bedrock/` route, and where its jobs' files go.

- **Credentials and Region**: boto3's default chain alone (environment, `AWS_PROFILE` and
  `~/.aws/config`, SSO, an instance or container role; `AWS_DEFAULT_REGION` or the profile's `region`). They
  are never read, stored nor printed here: a client is handed none. The simulated provider's
  rehearsal is the one exception: its clients get the placeholder key every simulated endpoint
  gets and the Region `us-east-1`, so that no real credential is ever sent to it.
- **Endpoints**: boto3's own for the Region, unless `BEDROCK_BASE_URL` names one URL that serves
  all three services a route calls (`bedrock`, `bedrock-runtime`, `s3`): the simulated provider's,
  or a local double of them.
- **Where the files go**: `BEDROCK_S3_URI` (`s3://<bucket>/<prefix>`): input files under
  `<prefix>/input/`, job outputs under `<prefix>/output/`; **the role** the jobs run as (it reads
  and writes that bucket): `BEDROCK_ROLE_ARN`. Both checked against the patterns botocore's service
  model gives `S3Uri` and `RoleArn`, before anything is sent.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from lexpilot_batch.errors import ConfigError
from lexpilot_batch.providers.backends import SIMULATED
from lexpilot_batch.providers.routing.endpoints import Endpoint

S3_VAR, ROLE_VAR = "BEDROCK_S3_URI", "BEDROCK_ROLE_ARN"
DEFAULT_URL = "aws://default"  # the provider's base URL: boto3 finds each service's endpoint
# Where a rehearsal's files go and the role it names, unless the environment says: no real account.
SIMULATED_S3, SIMULATED_ROLE = "s3://lexpilot-simulated/batches", "arn:aws:iam::123456789012:role/lexpilot-simulated"
SIMULATED_REGION = "us-east-1"
# botocore's service model (`bedrock/2023-04-20`): `S3Uri`, `RoleArn`.
_S3_URI = re.compile(r"s3://([a-z0-9][-.a-z0-9]{1,61}[a-z0-9])(?:/([-!_*'().a-zA-Z0-9/]*))?")
_ROLE = re.compile(r"arn:aws(-[^:]+)?:iam::([0-9]{12})?:role/.+")
HEADER = "X-Client-Request-Id"  # a rehearsal's call id (`sync.call.CLIENT_REQUEST_ID`): what it draws


@dataclass(frozen=True)
class Place:
    """Where a route's job files go: a bucket, a key prefix (empty or ending in `/`), the role."""

    bucket: str
    prefix: str
    role_arn: str

    def uri(self, key: str) -> str:
        return f"s3://{self.bucket}/{key}"


def place(endpoint: Endpoint, environ: Mapping[str, str] | None = None) -> Place:
    """`BEDROCK_S3_URI` and `BEDROCK_ROLE_ARN`, checked; a rehearsal's defaults where unset."""
    env = os.environ if environ is None else environ
    rehearsal = endpoint.backend == SIMULATED
    uri = env.get(S3_VAR) or (SIMULATED_S3 if rehearsal else "")
    role = env.get(ROLE_VAR) or (SIMULATED_ROLE if rehearsal else "")
    setup = "docs/providers.md, AWS Bedrock, says how to set up both"
    found = _S3_URI.fullmatch(uri)
    if found is None:
        said = f"it is {uri!r}" if uri else "it is not set"
        raise ConfigError(
            f"the {endpoint.where} needs an S3 location for its job files: set {S3_VAR}=s3://<bucket>/<prefix> "
            f"(a bucket of the account and Region the jobs run in; {said}); {setup}"
        )
    if not _ROLE.fullmatch(role):
        said = f"it is {role!r}" if role else "it is not set"
        raise ConfigError(
            f"the {endpoint.where} needs the IAM role its jobs run as: set {ROLE_VAR}=arn:aws:iam::<account>:role/<name> "
            f"(a service role Bedrock may assume, reading and writing {uri}; {said}); {setup}"
        )
    prefix = (found.group(2) or "").strip("/")
    return Place(found.group(1), prefix + "/" if prefix else "", role)


def client(endpoint: Endpoint, service: str, timeout: float, attempts: int) -> Any:
    """A boto3 client of `service` for the route: `attempts` tries in all (botocore's standard retry mode)."""
    from lexpilot_batch.providers.bedrock.spec import EXTRA

    boto3 = EXTRA.require()
    config = EXTRA.require("botocore.config").Config(
        connect_timeout=min(timeout, 60.0),
        read_timeout=timeout,
        retries={"max_attempts": max(1, attempts), "mode": "standard"},
        s3={"addressing_style": "path"},  # one URL for every bucket: a double's, and any bucket's name
    )
    options: dict[str, Any] = {"config": config}
    if endpoint.base_url != DEFAULT_URL:
        options["endpoint_url"] = endpoint.base_url
    if endpoint.backend == SIMULATED:
        options |= {
            "region_name": SIMULATED_REGION,
            "aws_access_key_id": "simulated",
            "aws_secret_access_key": endpoint.require_key(),
        }
    try:
        return boto3.session.Session().client(service, **options)
    except EXTRA.require("botocore.exceptions").NoRegionError:
        raise ConfigError(
            f"the {endpoint.where}: boto3 found no AWS Region; set AWS_DEFAULT_REGION (or a profile's region in "
            "~/.aws/config) to the Region the jobs run in"
        ) from None


def tag_call(made: Any, operation: str, header: str, value: Any) -> None:
    """Send `header` with every call of `operation` of client `made`, its value `value()` at the time
    (boto3's documented event hooks, `before-sign`): a rehearsal's call id."""

    def add(request: Any, **_: Any) -> None:
        found = value()
        if found:
            request.headers[header] = found

    made.meta.events.register(f"before-sign.{made.meta.service_model.service_id.hyphenize()}.{operation}", add)
