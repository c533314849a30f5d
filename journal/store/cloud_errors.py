"""One line for a cloud store's error: what is missing or wrong, and what to set.

obstore's errors are many lines (a ``Debug source:`` dump of the Rust error). The
operator gets one line naming the cause (no credentials, credentials refused, the
wrong region, a missing bucket, an unreachable endpoint) and the setting that fixes
it; the raw text is kept as the error's ``backend_said`` (``--debug`` prints it, the
``--json`` error object carries it as ``detail``).
"""

from __future__ import annotations

import re
from urllib.parse import parse_qsl, urlsplit

from ..errors import ConfigError

#: Where each provider's credentials come from, when none were found.
CREDENTIALS = {
    "s3": "set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (and AWS_REGION), or run where an instance or "
          "container role provides them",
    "gs": "set GOOGLE_SERVICE_ACCOUNT (or GOOGLE_APPLICATION_CREDENTIALS) to a service-account key file, or run "
          "where the metadata server provides them",
    "az": "set AZURE_STORAGE_ACCOUNT_NAME and AZURE_STORAGE_ACCOUNT_KEY (or AZURE_STORAGE_SAS_TOKEN)",
}
#: The settings to check when the provider refuses the credentials.
SECRETS = {"s3": "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY", "gs": "GOOGLE_SERVICE_ACCOUNT",
           "az": "AZURE_STORAGE_ACCOUNT_NAME and AZURE_STORAGE_ACCOUNT_KEY"}
PROVIDERS = {"s3": "S3", "gs": "GCS", "az": "Azure"}
_FAMILY = {"s3": "s3", "s3a": "s3", "gs": "gs", "az": "az", "azure": "az", "abfs": "az", "abfss": "az"}

_NO_CREDENTIALS = re.compile(r"latest/api/token|latest/meta-data|computeMetadata|169\.254\.169\.254|"
                             r"token request|Missing (SecretAccessKey|AccessKeyId|AccessKey)|"
                             r"Account must be specified|credentials? (not found|provider)", re.I)
_REFUSED = re.compile(r"InvalidAccessKeyId|SignatureDoesNotMatch|AccessDenied|InvalidToken|ExpiredToken|"
                      r"AuthenticationFailed|\b(401|403) (Unauthorized|Forbidden)\b")
_REGION = re.compile(r"PermanentRedirect|AuthorizationHeaderMalformed|IllegalLocationConstraint|"
                     r"\b301 Moved Permanently\b|region", re.I)
_NO_BUCKET = re.compile(r"NoSuchBucket|ContainerNotFound|The specified bucket does not exist")
_UNREACHABLE = re.compile(r"error sending request|dns error|Connection refused|connection error|timed out|"
                          r"operation timed out", re.I)


def family(url: str) -> str:
    """``s3``, ``gs`` or ``az`` for a cloud store URL."""
    return _FAMILY.get(urlsplit(url).scheme.lower(), "s3")


def no_credentials(raw: str) -> bool:
    """Whether a cloud error's text ``raw`` says that no credentials were found."""
    return _NO_CREDENTIALS.search(raw) is not None


def explain(url: str, raw: str) -> str | None:
    """The cause and the fix for a cloud error's text ``raw`` on the store at ``url``,
    as "cause; fix", or None when the text says nothing this module knows."""
    kind = family(url)
    provider = PROVIDERS[kind]
    parts = urlsplit(url)
    options = dict(parse_qsl(parts.query))
    if _NO_CREDENTIALS.search(raw):
        what = ("AWS_ACCESS_KEY_ID is set without AWS_SECRET_ACCESS_KEY" if re.search(r"Missing SecretAccessKey", raw)
                else "no Azure storage account is named" if "Account must be specified" in raw
                else "none in the environment, and no metadata service gave any")
        return f"no {provider} credentials ({what}); {CREDENTIALS[kind]}"
    if _NO_BUCKET.search(raw):
        return f"bucket {parts.netloc!r} does not exist there; create it, or fix the bucket in JOURNAL_STORE"
    if _REFUSED.search(raw):
        code = re.search(r"<Code>(\w+)</Code>", raw)
        return (f"{provider} refused the credentials ({code.group(1) if code else _REFUSED.search(raw).group(0)}); "
                f"check {SECRETS[kind]}, and that they may read and write this bucket")
    endpoint = options.get("endpoint") or options.get("aws_endpoint")
    if "builder error" in raw and endpoint and endpoint.startswith("http://") and not options.get("allow_http"):
        return f"the endpoint {endpoint} is plain http; add &allow_http=true to the store URL"
    if kind == "s3" and _REGION.search(raw) and re.search(r"\b(301|400)\b|Redirect|Malformed", raw):
        return "the bucket is in another region; set AWS_REGION (or ?region= on the store URL) to the bucket's region"
    if _UNREACHABLE.search(raw):
        where = endpoint or f"the {provider} service"
        return (f"cannot reach {where} ({_UNREACHABLE.search(raw).group(0)}); check the network"
                + (" and the endpoint on the store URL" if endpoint else ", a proxy (HTTPS_PROXY), or ?endpoint="))
    return None


def first_line(raw: str, limit: int = 300) -> str:
    """The backend's message without its debug dump: the first non-empty line, with
    obstore's ``Generic S3 error:`` prefix dropped, at most ``limit`` characters."""
    line = next((ln.strip() for ln in raw.splitlines() if ln.strip()), raw.strip())
    line = re.sub(r"^Generic \w+ error: ", "", line)
    return line if len(line) <= limit else line[:limit - 3] + "..."


class NoCloudCredentials(ConfigError):
    """A cloud store and no credentials for it: none configured, and no metadata service
    gave any (exit 2, as a missing key). ``backend_said``: the client's own words."""

    def __init__(self, message: str, backend_said: str | None = None):
        super().__init__(message)
        self.backend_said = backend_said
