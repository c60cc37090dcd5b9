"""Signing in to the console with a real local OpenID provider (authorization code with
PKCE), pages then calling the API with the provider's JWT, and every refusal ending on
the sign-in page with its code and no session; and the model page's lineage graph."""

from __future__ import annotations

import base64
import functools
import html
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, quote, urlparse

import httpx
import pytest
from sqlalchemy import func, select
from starlette.testclient import TestClient

from modelport.clock import Clock, ManualClock
from modelport.store.tables import ConsoleSessionRow
from tests.console.conftest import MODEL, Console, browser_client, csrf_of, seed, sign_in
from tests.metering.conftest import Platform, approve, make_platform
from tests.registry.helpers import manifest_for, put_blob
from tests.tenancy.oidc_provider import AUDIENCE, CLIENT_ID, LocalProvider, rsa_key

GROUP_ROLES = {"beta-users": "beta:consumer", "ghost-team": "ghost:consumer"}
USERS = {"alice": ["beta-users"], "dave": ["unrelated"], "frank": ["ghost-team"]}
CALLBACK = "/console/sign-in/oidc/callback"


@pytest.fixture
def provider() -> Iterator[LocalProvider]:
    started = LocalProvider(users={k: list(v) for k, v in USERS.items()}).start()
    yield started
    started.stop()


def oidc_platform(
    home: Path, database_url: str, provider: LocalProvider, *, clock: Clock | None = None
) -> Platform:
    """The console fixture's platform, with sign-in through ``provider`` (no leeway, so
    a short-lived token expires when it says), waiting on ``clock``."""
    return make_platform(
        home,
        database_url,
        clock=clock,
        oidc_issuer=provider.issuer,
        oidc_audience=AUDIENCE,
        oidc_client_id=CLIENT_ID,
        oidc_group_roles=GROUP_ROLES,
        oidc_leeway_seconds=0,
    )


@pytest.fixture
def oidc_console(tmp_path: Path, database_url: str, provider: LocalProvider) -> Iterator[Console]:
    platform = oidc_platform(tmp_path / "home", database_url, provider)
    try:
        yield seed(platform)
    finally:
        platform.close_client()
        platform.services.close()


def session_count(console: Console) -> int:
    with console.services.database.transaction() as db:
        return int(db.scalar(select(func.count()).select_from(ConsoleSessionRow)) or 0)


def through_provider(client: TestClient, target: str = "/console/models") -> str:
    """The sign-in page's provider link → the provider (which approves at once) → the
    callback URL it sends the browser back to."""
    form = client.get("/console/sign-in", params={"next": target})
    assert form.status_code == 200
    link = re.search(r'<a class="button" href="(/console/sign-in/oidc\?next=[^"]*)"', form.text)
    assert link, "the sign-in page offers no provider"
    return from_start(client, html.unescape(link[1]))


def from_start(client: TestClient, start_url: str) -> str:
    """``start_url`` (the sign-in's start) → the provider → the callback URL."""
    start = client.get(start_url, follow_redirects=False)
    assert start.status_code == 303, start.text
    at_provider = httpx.get(start.headers["location"], follow_redirects=False)
    assert at_provider.status_code == 302, at_provider.text
    back = urlparse(at_provider.headers["location"])
    assert f"{back.scheme}://{back.netloc}{back.path}" == f"http://testserver{CALLBACK}"
    return f"{back.path}?{back.query}"


def assert_refused(
    client: TestClient,
    url: str,
    status: int,
    code: str,
    params: dict[str, str] | None = None,
) -> None:
    """Following ``url`` ends on the sign-in page again, with the refusal's code, and
    no session cookie."""
    response = client.get(url, params=params)
    assert response.status_code == status, response.text
    assert 'role="alert"' in response.text and f"({code})" in response.text
    assert '<form method="post" action="/console/sign-in">' in response.text
    set_cookies = response.headers.get_list("set-cookie")
    assert not any(c.startswith("modelport_console=") for c in set_cookies)


# ---- the sign-in page


def test_without_oidc_the_sign_in_page_offers_no_provider(console: Console) -> None:
    client = browser_client(console)
    page = client.get("/console/sign-in")
    assert page.status_code == 200
    assert "/console/sign-in/oidc" not in page.text and 'class="oidc"' not in page.text
    assert client.get("/console/sign-in/oidc").status_code == 404
    assert client.get(CALLBACK, params={"code": "c", "state": "s"}).status_code == 404


def test_the_sign_in_page_names_the_provider(
    oidc_console: Console, provider: LocalProvider
) -> None:
    page = browser_client(oidc_console).get("/console/sign-in", params={"next": "/console/keys"})
    assert f"Sign in with {urlparse(provider.issuer).netloc}</a>" in page.text
    assert 'href="/console/sign-in/oidc?next=/console/keys"' in page.text
    assert 'action="/console/sign-in"' in page.text  # API keys still work beside it


# ---- a full sign-in


def test_sign_in_through_the_provider_to_pages_that_call_the_api(
    oidc_console: Console, provider: LocalProvider
) -> None:
    client = browser_client(oidc_console)
    start = client.get("/console/sign-in/oidc?next=/console/models", follow_redirects=False)
    assert start.status_code == 303
    # The sign-in under way is sealed in an HTTP-only cookie: no verifier in clear.
    query = parse_qs(urlparse(start.headers["location"]).query)
    assert query["code_challenge_method"] == ["S256"]
    pending = next(
        c for c in start.headers.get_list("set-cookie") if c.startswith("modelport_console_oidc=")
    )
    assert "HttpOnly" in pending and "Path=/console" in pending and "SameSite=lax" in pending
    assert query["state"][0] not in pending
    back = urlparse(
        httpx.get(start.headers["location"], follow_redirects=False).headers["location"]
    )
    done = client.get(f"{back.path}?{back.query}", follow_redirects=False)
    assert done.status_code == 303, done.text
    assert done.headers["location"] == "/console/models"
    session_cookie = next(
        c for c in done.headers.get_list("set-cookie") if c.startswith("modelport_console=")
    )
    assert "HttpOnly" in session_cookie and "SameSite=lax" in session_cookie
    # The session holds the provider's JWT for the API (sealed), tenant from the mapping.
    session_id = session_cookie.split(";")[0].split("=", 1)[1]
    session = oidc_console.services.console_sessions.find(session_id)
    assert session is not None and session.tenant == "beta"
    assert oidc_console.services.authenticator.authenticate(session.credential).id == (
        "beta/oidc:alice"
    )
    with oidc_console.services.database.transaction() as db:
        [row] = db.scalars(select(ConsoleSessionRow)).all()
        assert row.credential.startswith("fernet:v1:") and session.credential not in row.credential
    # Pages call the API as alice: the catalog, the model page, and a call on /v2.
    catalog = client.get("/console/models")
    assert catalog.status_code == 200 and MODEL in catalog.text
    assert "acme/secret" not in catalog.text  # acme's private model: not beta's
    page = client.get(f"/console/models/{MODEL}")
    assert page.status_code == 200
    ran = client.post(
        f"/console/models/{MODEL}/playground",
        data={"csrf_token": csrf_of(page.text), "input:x": "1, 2, 3, 4"},
    )
    assert ran.status_code == 200, ran.text
    assert 'id="answer"' in ran.text
    [entry] = oidc_console.platform.entries()  # metered to beta, with no key
    assert entry.event.tenant == "beta" and entry.event.key_id is None
    # The pending sign-in was single use: the same callback again starts nothing.
    assert_refused(client, f"{back.path}?{back.query}", 401, "oidc_state_mismatch")


def test_next_stays_in_the_console(oidc_console: Console, provider: LocalProvider) -> None:
    client = browser_client(oidc_console)
    done = client.get(through_provider(client, "/console/keys"), follow_redirects=False)
    assert done.headers["location"] == "/console/keys"
    for target in ("//evil.example/x", "https://evil.example/console", "/api/keys"):
        other = browser_client(oidc_console)
        callback = from_start(other, f"/console/sign-in/oidc?next={quote(target, safe='')}")
        done = other.get(callback, follow_redirects=False)
        assert done.status_code == 303 and done.headers["location"] == "/console/", target
    # A next cookie changed by hand is checked again when it is read.
    other = browser_client(oidc_console)
    callback = from_start(other, "/console/sign-in/oidc")
    other.cookies.set("modelport_console_oidc_next", "//evil.example/x", path="/console")
    assert other.get(callback, follow_redirects=False).headers["location"] == "/console/"


# ---- refusals: the sign-in page with a code, and no session


def test_a_forged_state_another_browser_and_a_denial_are_refused(
    oidc_console: Console, provider: LocalProvider
) -> None:
    client = browser_client(oidc_console)
    callback = through_provider(client)
    assert_refused(client, callback.replace("state=", "state=x"), 401, "oidc_state_mismatch")
    stranger = browser_client(oidc_console)  # never began this sign-in
    assert_refused(stranger, through_provider(client), 401, "oidc_state_mismatch")
    assert_refused(client, CALLBACK, 401, "oidc_denied", {"error": "access_denied"})
    assert_refused(client, CALLBACK, 400, "oidc_callback_invalid")
    assert session_count(oidc_console) == 0


def test_a_token_signed_with_another_key_is_refused(
    oidc_console: Console, provider: LocalProvider
) -> None:
    impostor = rsa_key(provider.key.kid or "k1")  # the provider's key id, another key
    provider.token = functools.partial(provider.token, key=impostor)  # type: ignore[method-assign]
    client = browser_client(oidc_console)
    assert_refused(client, through_provider(client), 401, "token_invalid")
    assert session_count(oidc_console) == 0
    assert client.get("/console/models", follow_redirects=False).status_code == 303


def test_groups_without_a_mapping_are_refused(
    oidc_console: Console, provider: LocalProvider
) -> None:
    for subject, code in (("dave", "oidc_unmapped"), ("frank", "oidc_tenant_unknown")):
        provider.signed_in = subject
        client = browser_client(oidc_console)
        assert_refused(client, through_provider(client), 403, code)
    assert session_count(oidc_console) == 0


def test_an_expired_token_signs_the_person_out(
    tmp_path: Path, database_url: str, provider: LocalProvider
) -> None:
    # The provider issues its tokens on the platform's clock, which the test moves past
    # their expiry instead of waiting for it.
    clock = ManualClock()
    provider.now = lambda: clock.now().timestamp()
    provider.token_lifetime = 8
    platform = oidc_platform(tmp_path / "home", database_url, provider, clock=clock)
    try:
        console = seed(platform)
        client = browser_client(console)
        assert client.get(through_provider(client), follow_redirects=False).status_code == 303
        clock.advance(7)  # a second before the token expires (no leeway)
        assert client.get("/console/models").status_code == 200
        clock.advance(1)  # the second it expires
        gone = client.get("/console/models", follow_redirects=False)
        assert gone.status_code == 303
        assert gone.headers["location"] == f"/console/sign-in?next={quote('/console/models', '')}"
        assert session_count(console) == 0  # the session ended, not only the page
    finally:
        platform.close_client()
        platform.services.close()


@pytest.mark.parametrize(
    ("audience", "credential"),
    [(None, "id_token"), ("another-api", None)],
    ids=["audience-is-the-client", "no-token-for-the-api"],
)
def test_the_session_holds_the_token_the_api_accepts(
    tmp_path: Path,
    database_url: str,
    provider: LocalProvider,
    audience: str | None,
    credential: str | None,
) -> None:
    """With the client id as the API's audience, the id token is the credential (the
    access token is for another audience); with an audience neither token carries, the
    sign-in is refused before any session."""
    platform = make_platform(
        tmp_path / "home",
        database_url,
        oidc_issuer=provider.issuer,
        oidc_audience=audience,
        oidc_client_id=CLIENT_ID,
        oidc_group_roles=GROUP_ROLES,
    )
    try:
        console = seed(platform)
        client = browser_client(console)
        if credential is None:
            assert_refused(client, through_provider(client), 401, "oidc_no_api_token")
            assert session_count(console) == 0
            return
        done = client.get(through_provider(client), follow_redirects=False)
        assert done.status_code == 303, done.text
        session = console.services.console_sessions.find(client.cookies["modelport_console"])
        assert session is not None
        claims = json.loads(base64.urlsafe_b64decode(session.credential.split(".")[1] + "=="))
        assert claims["aud"] == CLIENT_ID and "nonce" in claims  # the id token
        assert client.get("/console/models").status_code == 200
    finally:
        platform.close_client()
        platform.services.close()


# ---- the lineage graph on the model page


def publish(
    console: Console, ref: str, license: str, *, private: bool = False, **extra: Any
) -> None:
    owner, name = ref.split("/")
    body = {"owner": owner, "name": name, "visibility": "private" if private else "public"}
    assert console.platform.client.post("/api/models", json=body).status_code == 201
    data = f"weights of {ref}".encode()
    put_blob(console.services.blob_store, data)
    manifest = manifest_for(data, license=license, description=ref, **extra)
    console.services.registry.publish(owner, name, "1", manifest, actor="seed")
    approve(console.services, owner, name, "1")


def parent(ref: str, relation: str) -> dict[str, str]:
    return {"model": ref, "version": "1", "relation": relation}


@pytest.fixture
def family(console: Console) -> Console:
    """acme/tuned:1 distilled from acme/base:1 (fine-tuned from acme/origin:1) and
    merged from gamma/hidden:1 (private to gamma), itself derived from acme/root:1."""
    publish(console, "acme/origin", "Apache-2.0")
    publish(console, "acme/base", "MIT", parents=[parent("acme/origin", "fine-tuned-from")])
    publish(console, "acme/root", "BSD-3-Clause")
    publish(
        console,
        "gamma/hidden",
        "GPL-3.0-only",
        private=True,
        parents=[parent("acme/root", "derived-from")],
    )
    publish(
        console,
        "acme/tuned",
        "MIT",
        parents=[parent("acme/base", "distilled-from"), parent("gamma/hidden", "merged-from")],
    )
    return console


def lineage_section(html: str) -> str:
    start = html.index('<section aria-labelledby="lineage-h">')
    return html[start : html.index("</section>", start)]


def test_the_lineage_graph_shows_ancestors_with_their_licences(family: Console) -> None:
    client = browser_client(family)
    sign_in(client, family.beta_key)
    page = client.get("/console/models/acme/tuned", params={"version": "1"})
    assert page.status_code == 200, page.text
    section = lineage_section(page.text)
    svg = section[section.index("<svg") : section.index("</svg>")]
    assert 'role="img"' in svg and "<title" in svg
    for ref, licence in (
        ("acme/tuned:1", "MIT"),
        ("acme/base:1", "MIT"),
        ("acme/origin:1", "Apache-2.0"),
        ("acme/root:1", "BSD-3-Clause"),
    ):
        assert f"<title>{ref}: {licence}</title>" in svg
    # Edges: each version points at what it derives from; root is reached only through
    # a version beta may not see, so it is drawn dashed.
    assert "acme/tuned:1 distilled-from acme/base:1</title>" in svg
    assert "acme/base:1 fine-tuned-from acme/origin:1</title>" in svg
    assert "acme/tuned:1 derived-from acme/root:1 (through versions not shown)" in svg
    assert svg.count("stroke-dasharray") == 2  # its arrow and its outline
    # The text alternative: the same ancestors, licences and edges in a table.
    table = section[section.index("<table") :]
    for ref, licence in (("acme/base:1", "MIT"), ("acme/origin:1", "Apache-2.0")):
        row = table[table.index(f">{ref}</a></th>") :]
        assert row[: row.index("</tr>")].count(f"<td>{licence}</td>") == 1
    assert "acme/base:1 (fine-tuned-from)" in table
    assert "Apache-2.0, BSD-3-Clause, MIT" in section


def test_another_tenants_private_ancestor_is_not_named(family: Console) -> None:
    client = browser_client(family)
    sign_in(client, family.beta_key)
    page = client.get("/console/models/acme/tuned", params={"version": "1"})
    assert "gamma/hidden" not in page.text and "hidden" not in lineage_section(page.text)
    assert "GPL-3.0-only" not in page.text
    # gamma, who may see it, gets it drawn, with its licence and its edge.
    gamma = browser_client(family)
    sign_in(gamma, family.gamma_key)
    theirs = lineage_section(gamma.get("/console/models/acme/tuned?version=1").text)
    assert "<title>gamma/hidden:1: GPL-3.0-only</title>" in theirs
    assert "gamma/hidden:1 derived-from acme/root:1</title>" in theirs
    assert "stroke-dasharray" not in theirs


def test_a_version_without_ancestors_says_so(console: Console) -> None:
    client = browser_client(console)
    sign_in(client, console.beta_key)
    section = lineage_section(client.get(f"/console/models/{MODEL}").text)
    assert "<svg" not in section and "declares no ancestors you can see" in section
