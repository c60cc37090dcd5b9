"""Signatures as the Standard Webhooks reference library verifies them."""

from __future__ import annotations

import time

import pytest

from modelport.webhooks.signing import SECRET_PREFIX, new_secret, sign, signed_headers
from tests.webhooks.conftest import reference


def test_a_signature_verifies_with_the_reference_library() -> None:
    secret = new_secret()
    assert secret.startswith(SECRET_PREFIX)
    body = (
        b'{"type":"job.succeeded","timestamp":"2026-12-01T00:00:00+00:00","data":{"a":"\xc3\xa9"}}'
    )
    headers = signed_headers([secret], "msg_1", int(time.time()), body)
    assert reference().Webhook(secret).verify(body, headers)["data"] == {"a": "é"}


def test_every_secret_of_an_overlap_signs_and_any_one_verifies() -> None:
    old, new, other = new_secret(), new_secret(), new_secret()
    body = b'{"type":"t","timestamp":"x","data":{}}'
    headers = signed_headers([new, old], "msg_2", int(time.time()), body)
    assert len(headers["webhook-signature"].split(" ")) == 2
    for secret in (old, new):
        reference().Webhook(secret).verify(body, headers)
    with pytest.raises(reference().WebhookVerificationError):
        reference().Webhook(other).verify(body, headers)


def test_a_changed_body_or_id_does_not_verify() -> None:
    secret = new_secret()
    now = int(time.time())
    headers = signed_headers([secret], "msg_3", now, b"{}")
    with pytest.raises(reference().WebhookVerificationError):
        reference().Webhook(secret).verify(b'{"x":1}', headers)
    assert sign(secret, "msg_3", now, b"{}") != sign(secret, "msg_4", now, b"{}")


def test_no_secret_no_headers() -> None:
    with pytest.raises(ValueError):
        signed_headers([], "msg", 0, b"{}")
