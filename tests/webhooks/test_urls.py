"""The URL policy: https to public addresses only, unless the operator allow-lists a
host; refusals name the rule with a stable code."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from modelport.errors import InvalidInput
from modelport.webhooks.sender import pinned_url
from modelport.webhooks.urls import Target, UrlPolicy

PUBLIC = "93.184.216.34"


def resolving(mapping: dict[str, Sequence[str]]) -> UrlPolicy:
    def resolve(host: str, port: int) -> Sequence[str]:
        if host not in mapping:
            raise OSError("no such host")
        return mapping[host]

    return UrlPolicy((), resolve)


def refused(policy: UrlPolicy, url: str) -> str:
    with pytest.raises(InvalidInput) as caught:
        policy.check(url)
    return caught.value.code


def test_a_public_https_url_is_allowed_with_the_addresses_checked() -> None:
    policy = resolving({"hooks.example.com": [PUBLIC]})
    target = policy.check("https://hooks.example.com/jobs?x=1")
    assert target == Target(
        "https://hooks.example.com/jobs?x=1", "hooks.example.com", 443, (PUBLIC,)
    )


def test_plain_http_is_refused() -> None:
    policy = resolving({"hooks.example.com": [PUBLIC]})
    assert refused(policy, "http://hooks.example.com/jobs") == "webhook_url_not_https"


@pytest.mark.parametrize(
    "url",
    [
        "https://10.0.0.1/",
        "https://172.16.5.4/",
        "https://192.168.1.10:8443/",
        "https://127.0.0.1/",
        "https://127.1.2.3/",
        "https://[::1]/",
        "https://169.254.169.254/latest/meta-data/",  # the cloud metadata service
        "https://[fe80::1]/",
        "https://224.0.0.1/",
        "https://240.0.0.1/",
        "https://0.0.0.0/",
        "https://100.64.0.1/",
        "https://[::ffff:127.0.0.1]/",
        "https://[fc00::1]/",
    ],
)
def test_internal_addresses_are_refused(url: str) -> None:
    assert refused(UrlPolicy(), url) == "webhook_url_forbidden_address"


def test_a_name_resolving_to_an_internal_address_is_refused() -> None:
    policy = resolving({"inside.example.com": [PUBLIC, "10.1.2.3"], "meta": ["169.254.169.254"]})
    assert refused(policy, "https://inside.example.com/") == "webhook_url_forbidden_address"
    assert refused(policy, "https://meta/") == "webhook_url_forbidden_address"


def test_localhost_is_refused_by_the_system_resolver() -> None:
    assert refused(UrlPolicy(), "https://localhost:8443/hook") == "webhook_url_forbidden_address"


def test_a_name_that_does_not_resolve_is_refused() -> None:
    assert refused(resolving({}), "https://nowhere.example.com/") == "webhook_url_unresolvable"


@pytest.mark.parametrize(
    "url",
    [
        "ftp://hooks.example.com/",
        "hooks.example.com/jobs",
        "https://",
        "https://user:secret@hooks.example.com/",
        "https://hooks.example.com:99999/",
        "https://hooks.example.com/#frag",
        "https://hooks.example.com/" + "a" * 2100,
    ],
)
def test_malformed_urls_are_refused(url: str) -> None:
    policy = resolving({"hooks.example.com": [PUBLIC]})
    assert refused(policy, url) == "webhook_url_invalid"


def test_an_allow_listed_host_and_port_waives_https_and_the_address_rules() -> None:
    policy = UrlPolicy(["127.0.0.1:8123", "devbox"])
    assert policy.check("http://127.0.0.1:8123/hook").addresses == ()
    assert refused(policy, "http://127.0.0.1:8124/hook") == "webhook_url_not_https"
    assert refused(policy, "https://127.0.0.1:8124/hook") == "webhook_url_forbidden_address"
    # a bare host: any port
    assert policy.check("http://devbox:9000/").host == "devbox"
    assert policy.check("http://DEVBOX/").port == 80


def test_the_attempt_connects_to_the_checked_address() -> None:
    target = Target("https://hooks.example.com:8443/a/b?c=d", "hooks.example.com", 8443, ())
    assert pinned_url(target, PUBLIC) == f"https://{PUBLIC}:8443/a/b?c=d"
    assert pinned_url(target, "2001:db8::1") == "https://[2001:db8::1]:8443/a/b?c=d"
    bare = Target("https://hooks.example.com", "hooks.example.com", 443, ())
    assert pinned_url(bare, PUBLIC) == f"https://{PUBLIC}/"
