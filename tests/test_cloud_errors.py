"""One line for a cloud store's error (``store/cloud_errors.py``), from the texts
obstore gives for each cause (recorded from obstore 0.8 where they need a network)."""

from __future__ import annotations

import pytest

from journal.store.cloud_errors import explain, first_line

GCS_NO_CREDENTIALS = (
    "Generic GCS error: Error performing token request: Error performing GET http://169.254.169.254/computeMetadata/"
    "v1/instance/service-accounts/default/token?audience=x in 723.06µs - Server returned non-2xx status code: 403 "
    "Forbidden: resolve_deny: denied destination\n\nDebug source:\nGeneric {\n    store: \"GCS\",\n}")
S3_WRONG_REGION = (
    "Generic S3 error: Error performing GET https://b.s3.amazonaws.com/p/config in 80ms - Server returned non-2xx "
    "status code: 301 Moved Permanently: <Error><Code>PermanentRedirect</Code></Error>\n\nDebug source:\n...")
S3_REFUSED = (
    "Generic S3 error: Error performing GET http://h/b/p/config in 3ms - Server returned non-2xx status code: 403 "
    "Forbidden: <Error><Code>InvalidAccessKeyId</Code></Error>\n\nDebug source:\n...")
S3_UNREACHABLE = (
    "Generic S3 error: Error performing GET http://127.0.0.1:9/b/p/config in 933ms, after 5 retries, max_retries: 5, "
    "retry_timeout: 60s  - HTTP error: error sending request\n\nDebug source:\n...")


@pytest.mark.parametrize(("url", "raw", "says"), [
    ("gs://bucket/p", GCS_NO_CREDENTIALS, "no GCS credentials (none in the environment"),
    ("gs://bucket/p", GCS_NO_CREDENTIALS, "set GOOGLE_SERVICE_ACCOUNT"),
    ("az://container/p", "Generic MicrosoftAzure error: Account must be specified\n\nDebug source:\n...",
     "no Azure credentials (no Azure storage account is named); set AZURE_STORAGE_ACCOUNT_NAME"),
    ("s3://b/p", S3_WRONG_REGION, "the bucket is in another region; set AWS_REGION"),
    ("s3://b/p", S3_REFUSED, "S3 refused the credentials (InvalidAccessKeyId); check AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY"),
    ("s3://b/p?endpoint=http://127.0.0.1:9&allow_http=true", S3_UNREACHABLE,
     "cannot reach http://127.0.0.1:9 (error sending request); check the network and the endpoint"),
], ids=["gcs-none", "gcs-fix", "azure-account", "s3-region", "s3-refused", "s3-unreachable"])
def test_each_cause_is_named_with_what_to_set(url, raw, says):
    assert says in explain(url, raw)


def test_an_unknown_error_keeps_its_first_line_without_the_debug_dump():
    raw = "Generic S3 error: something new happened\n\nDebug source:\nGeneric {\n}"

    assert explain("s3://b/p", raw) is None
    assert first_line(raw) == "something new happened"
