"""Whether an S3 store can have credentials, found out before its first request.

obstore takes S3 credentials from the environment or the store URL; with none there,
it asks the instance metadata service (``http://169.254.169.254``, or
``$AWS_METADATA_ENDPOINT``), retrying for up to a minute. Off a cloud VM nothing
answers there, and a command would hang that long before saying "no credentials".
So when no credential source is configured, that address is probed once, for at most
``PROBE_SECONDS``: an answer of any kind lets obstore go on and ask it; no answer is
``NoCloudCredentials`` (exit 2), naming the address, and obstore is never asked.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Mapping
from urllib.parse import urlsplit

from .cloud_errors import NoCloudCredentials

#: How long the metadata service may take to answer the probe.
PROBE_SECONDS = 2.0
METADATA_ENDPOINT = "http://169.254.169.254"
#: Settings (``AWS_<NAME>`` in the environment, ``<name>`` or ``aws_<name>`` on the URL)
#: any of which gives obstore credentials without the metadata service.
SOURCES = ("access_key_id", "web_identity_token_file", "container_credentials_relative_uri",
           "container_credentials_full_uri")
_YES = {"1", "true", "yes", "on"}


def _setting(name: str, options: Mapping[str, str], env: Mapping[str, str]) -> str | None:
    for value in (options.get(name), options.get(f"aws_{name}"), env.get(f"AWS_{name.upper()}")):
        if value:
            return value
    return None


def check_s3_credentials(url: str, options: Mapping[str, str], env: Mapping[str, str]) -> None:
    """Nothing when the S3 store at ``url`` (its URL ``options``) has a credential source
    configured, or is unsigned, or the metadata service answers the probe; else
    ``NoCloudCredentials``."""
    if any(_setting(name, options, env) for name in SOURCES):
        return
    if (_setting("skip_signature", options, env) or "").lower() in _YES:
        return
    endpoint = _setting("metadata_endpoint", options, env) or METADATA_ENDPOINT
    why = probe_metadata(endpoint, PROBE_SECONDS)
    if why is not None:
        raise NoCloudCredentials(
            f"store {url}: no S3 credentials (none in the environment or the store URL, and the instance metadata "
            f"service at {endpoint} did not answer: {why}); set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (and "
            "AWS_REGION), or run where an instance or container role provides them",
            backend_said=f"PUT {endpoint}/latest/api/token (the metadata service's token request, the one probe "
                         f"made, bounded to {PROBE_SECONDS:g} s): {why}")


def probe_metadata(endpoint: str, seconds: float) -> str | None:
    """None when something answers an IMDSv2 token request at ``endpoint`` within
    ``seconds`` (connecting included; any HTTP status will do); else why not."""
    parts = urlsplit(endpoint)
    host = parts.hostname or endpoint
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        return f"{endpoint} is not a URL"
    deadline = time.monotonic() + seconds
    try:
        with socket.create_connection((host, port), timeout=seconds) as sock:
            if parts.scheme == "https":
                return None   # a TLS service listens: obstore speaks to it
            sock.settimeout(max(deadline - time.monotonic(), 0.001))
            sock.sendall(b"PUT /latest/api/token HTTP/1.1\r\nHost: " + parts.netloc.encode() +
                         b"\r\nX-aws-ec2-metadata-token-ttl-seconds: 60\r\nContent-Length: 0\r\n"
                         b"Connection: close\r\n\r\n")
            if not sock.recv(1):
                return "it closed the connection without an answer"
    except TimeoutError:
        return f"no answer within {seconds:g} s"
    except OSError as err:
        return err.strerror or str(err)
    return None
