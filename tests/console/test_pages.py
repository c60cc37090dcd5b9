"""The console's pages over the real app, on SQLite and PostgreSQL: sign-in and its
cookie, CSRF on every form, the pages calling the API as the signed-in key (so another
tenant's private model, keys and usage stay out of reach), and sign-out."""

from __future__ import annotations

import re
from datetime import UTC, datetime

from sqlalchemy import select

from modelport.console.sessions import ConsoleSessions
from modelport.metering.types import Unit
from modelport.store.secrets import SecretBox
from modelport.store.tables import ConsoleSessionRow
from tests.conftest import ADMIN_KEY
from tests.console.conftest import (
    MODEL,
    Console,
    browser_client,
    csrf_of,
    sign_in,
)


def test_pages_need_a_session_and_send_to_sign_in(console: Console) -> None:
    client = browser_client(console)
    for path in ("/console/", "/console/models", f"/console/models/{MODEL}", "/console/keys"):
        response = client.get(path, follow_redirects=False)
        assert response.status_code == 303
        assert response.headers["location"].startswith("/console/sign-in?next=")


def test_sign_in_sets_a_session_cookie_and_seals_the_key(console: Console) -> None:
    client = browser_client(console)
    form = client.get("/console/sign-in")
    response = client.post(
        "/console/sign-in",
        data={"csrf_token": csrf_of(form.text), "api_key": console.beta_key, "next": "/x"},
        follow_redirects=False,
    )
    assert response.status_code == 303
    assert response.headers["location"] == "/console/"  # not a page elsewhere
    cookie = next(
        c for c in response.headers.get_list("set-cookie") if c.startswith("modelport_console=")
    )
    assert "HttpOnly" in cookie and "SameSite=lax" in cookie and "Path=/console" in cookie
    assert "Secure" not in cookie  # plain http: the documented development exception
    session_id = cookie.split(";")[0].split("=", 1)[1]
    with console.services.database.transaction() as db:
        [row] = db.scalars(select(ConsoleSessionRow)).all()
        assert row.credential.startswith("fernet:v1:")
        assert console.beta_key not in row.credential and session_id not in row.id_hash
        assert row.tenant == "beta"


def test_the_cookie_is_secure_over_https(console: Console) -> None:
    client = browser_client(console, https=True)
    form = client.get("/console/sign-in")
    response = client.post(
        "/console/sign-in",
        data={"csrf_token": csrf_of(form.text), "api_key": console.beta_key},
        follow_redirects=False,
    )
    cookies = response.headers.get_list("set-cookie")
    assert any(c.startswith("modelport_console=") and "Secure" in c for c in cookies)


def test_a_wrong_key_is_refused_and_starts_no_session(console: Console) -> None:
    client = browser_client(console)
    wrong = "mp_live_" + "a" * 16 + "_" + "b" * 40
    for key, status in ((wrong, 401), ("not a key", 401), ("", 400)):
        form = client.get("/console/sign-in")
        response = client.post(
            "/console/sign-in",
            data={"csrf_token": csrf_of(form.text), "api_key": key},
            follow_redirects=False,
        )
        assert response.status_code == status
        assert 'role="alert"' in response.text
    with console.services.database.transaction() as db:
        assert db.scalars(select(ConsoleSessionRow)).all() == []


def test_sign_in_without_its_form_token_is_refused(console: Console) -> None:
    """A page elsewhere cannot sign a browser in under its own key (login CSRF)."""
    client = browser_client(console)
    client.get("/console/sign-in")
    response = client.post(
        "/console/sign-in",
        data={"csrf_token": "forged", "api_key": console.beta_key},
        follow_redirects=False,
    )
    assert response.status_code == 403 and "csrf_refused" in response.text


def test_catalog_searches_and_filters_through_the_api(console: Console) -> None:
    client = browser_client(console)
    sign_in(client, console.beta_key)
    found = client.get("/console/models", params={"q": "summer"})
    assert found.status_code == 200 and MODEL in found.text
    assert "acme/secret" not in client.get("/console/models").text  # acme's private model
    filtered = client.get("/console/models", params={"task": "no-such-task"})
    assert MODEL not in filtered.text and "No models match" in filtered.text
    tagged = client.get("/console/models", params={"tag": "math", "owner": "acme"})
    assert MODEL in tagged.text


def test_catalog_search_shows_facets_and_suggestions(console: Console) -> None:
    client = browser_client(console)
    sign_in(client, console.beta_key)
    found = client.get("/console/models", params={"q": "summer"})
    assert found.status_code == 200 and MODEL in found.text
    assert 'aria-label="Facets"' in found.text and 'id="total"' in found.text
    facet = re.search(
        r'<a href="([^"]+)">tabular-regression</a> <span class="count">1<', found.text
    )
    assert facet, found.text
    narrowed = client.get(facet[1].replace("&amp;", "&"))
    assert MODEL in narrowed.text and 'aria-current="true"' in narrowed.text
    assert "acme/secret" not in client.get("/console/models", params={"q": "secret"}).text
    typo = client.get("/console/models", params={"q": "sumer"})
    assert "No models match" in typo.text and "Did you mean" in typo.text
    assert 'href="/console/models?q=summer">summer</a>' in typo.text
    assert 'aria-label="Facets"' not in client.get("/console/models").text


def test_catalog_pages_by_cursor(console: Console) -> None:
    admin = console.platform.client
    for n in range(30):
        body = {"owner": "acme", "name": f"m{n:02d}", "license": "MIT", "visibility": "public"}
        assert admin.post("/api/models", json=body).status_code == 201
    client = browser_client(console)
    sign_in(client, console.platform.key)
    first = client.get("/console/models", params={"owner": "acme"})
    next_link = re.search(r'href="([^"]+)" rel="next"', first.text)
    assert next_link
    second = client.get(next_link[1].replace("&amp;", "&"))
    names = set(re.findall(r"acme/m\d\d", first.text)) | set(re.findall(r"acme/m\d\d", second.text))
    assert len(names) == 30
    bad = client.get("/console/models", params={"cursor": "not-a-cursor"})
    assert bad.status_code == 400 and 'role="alert"' in bad.text


def test_model_page_shows_card_safely_versions_schema_price_and_calls(console: Console) -> None:
    client = browser_client(console)
    sign_in(client, console.beta_key)
    page = client.get(f"/console/models/{MODEL}")
    assert page.status_code == 200
    html = page.text
    assert "<h1>Adder</h1>" in html and "<strong>one</strong>" in html
    assert "<script>alert" not in html and "&lt;script&gt;" in html
    assert 'href="javascript:' not in html
    assert "approved" in html  # the version's lifecycle state
    assert "<code>x</code>" in html and "FP32" in html
    assert "$0.002500" in html  # the price rule
    assert f"/v2/models/{MODEL}/infer" in html  # curl, filled in
    assert "This is a tensor model" in html  # no openai SDK call for it
    assert f"client.infer(&#34;{MODEL}&#34;" in html  # tritonclient
    assert "Content-Security-Policy" in page.headers and page.headers["X-Frame-Options"] == "DENY"


def test_playground_calls_v2_as_the_signed_in_key(console: Console) -> None:
    client = browser_client(console)
    sign_in(client, console.beta_key)
    csrf = csrf_of(client.get(f"/console/models/{MODEL}").text)
    result = client.post(
        f"/console/models/{MODEL}/playground", data={"csrf_token": csrf, "input:x": "1, 2, 3, 4"}
    )
    assert result.status_code == 200, result.text
    answer = re.search(r'<pre id="answer">(.*?)</pre>', result.text, re.S)
    assert answer and "2.0" in answer[1] and "5.0" in answer[1]
    assert "$0.002500 per call" in result.text and 'id="latency"' in result.text
    [entry] = console.platform.entries()
    assert entry.event.tenant == "beta" and entry.event.amount_micros == 2_500
    assert entry.event.key_id == console.beta_key_id  # the session's own key, not the console's


def test_a_row_price_shows_on_the_model_page_and_prices_the_playground_call(
    console: Console,
) -> None:
    console.platform.price(100, model=MODEL, unit="row")
    client = browser_client(console)
    sign_in(client, console.beta_key)
    page = client.get(f"/console/models/{MODEL}").text
    assert re.search(r"<td>row</td><td>\$0\.000100</td>", page)  # the price list
    result = client.post(
        f"/console/models/{MODEL}/playground",
        data={"csrf_token": csrf_of(page), "input:x": "1, 2, 3, 4\n5, 6, 7, 8"},
    )
    assert result.status_code == 200, result.text
    assert "$0.002700 per call" in result.text  # a call and its two rows
    charged = {e.event.unit: e.event.amount_micros for e in console.platform.entries()}
    assert charged == {Unit.PREDICTION: 2_500, Unit.ROW: 200}


def test_playground_refuses_bad_input_before_calling(console: Console) -> None:
    client = browser_client(console)
    sign_in(client, console.beta_key)
    csrf = csrf_of(client.get(f"/console/models/{MODEL}").text)
    for text in ("1, 2, three, 4", "1, 2, 3", "", "nan, 1, 2, 3"):
        result = client.post(
            f"/console/models/{MODEL}/playground", data={"csrf_token": csrf, "input:x": text}
        )
        assert result.status_code == 400
        assert 'class="error"' in result.text
    assert console.platform.entries() == []


def test_every_form_needs_the_sessions_csrf_token(console: Console) -> None:
    client = browser_client(console)
    sign_in(client, console.beta_key)
    other = browser_client(console)
    sign_in(other, console.gamma_key)
    foreign = csrf_of(other.get("/console/keys").text)  # a real token, of another session
    posts = [
        ("/console/keys", {"name": "x"}),
        (f"/console/keys/{console.beta_key_id}/revoke", {}),
        (f"/console/models/{MODEL}/playground", {"input:x": "1,2,3,4"}),
        ("/console/sign-out", {}),
    ]
    for path, data in posts:
        for token in (None, foreign):
            sent = data if token is None else {**data, "csrf_token": token}
            refused = client.post(path, data=sent, follow_redirects=False)
            assert refused.status_code == 403, path
            assert "csrf_refused" in refused.text
    assert console.platform.entries() == []
    keys = console.services.tenancy.list_keys(tenant="beta", member="ana")
    assert len(keys) == 1 and keys[0].revoked_at is None


def test_keys_are_created_once_shown_and_revoked(console: Console) -> None:
    client = browser_client(console)
    sign_in(client, console.beta_key)
    csrf = csrf_of(client.get("/console/keys").text)
    created = client.post("/console/keys", data={"csrf_token": csrf, "name": "ci"})
    assert created.status_code == 201
    secret = re.search(r'<pre id="new-key">(mp_live_[^<]+)</pre>', created.text)
    assert secret
    listed = client.get("/console/keys").text
    assert "ci" in listed and secret[1] not in listed  # shown once only
    new_id = secret[1].split("_")[2]
    assert console.platform.infer(secret[1], model=MODEL).status_code == 200
    revoked = client.post(
        f"/console/keys/{new_id}/revoke", data={"csrf_token": csrf}, follow_redirects=False
    )
    assert revoked.status_code == 303
    assert console.platform.infer(secret[1], model=MODEL).status_code == 401


def test_usage_and_spend_show_the_tenants_calls(console: Console) -> None:
    for _ in range(2):
        assert console.platform.infer(console.beta_key, model=MODEL).status_code == 200
    console.platform.entries()  # delivered to the ledger
    client = browser_client(console)
    sign_in(client, console.beta_key)
    page = client.get("/console/usage")
    assert page.status_code == 200, page.text
    assert 'id="total">$0.005000<' in page.text
    assert re.search(rf"<td>{MODEL}</td><td>2</td><td>\$0.005000</td>", page.text)
    assert "<svg" in page.text and "Spend by day" in page.text
    by_key = re.search(r'<table id="by-key">(.*?)</table>', page.text, re.S)
    assert by_key and f"<code>{console.beta_key_id}</code></td><td>2</td>" in by_key[1]
    assert "$0.995000</span> available" in page.text
    gamma = browser_client(console)
    sign_in(gamma, console.gamma_key)
    theirs = gamma.get("/console/usage").text
    assert MODEL not in theirs and 'id="total">$0.000000<' in theirs
    bad = gamma.get("/console/usage", params={"period": "2026-13"})
    assert bad.status_code == 400 and 'role="alert"' in bad.text


def test_another_tenant_cannot_reach_private_pages_by_url(console: Console) -> None:
    gamma = browser_client(console)
    sign_in(gamma, console.gamma_key)
    private = gamma.get("/console/models/acme/secret")
    assert private.status_code == 404 and "model_not_found" in private.text
    assert "Playground" not in private.text and "Versions" not in private.text
    csrf = csrf_of(gamma.get("/console/keys").text)
    assert console.beta_key_id not in gamma.get("/console/keys").text
    revoke = gamma.post(f"/console/keys/{console.beta_key_id}/revoke", data={"csrf_token": csrf})
    assert revoke.status_code == 404
    assert console.platform.infer(console.beta_key, model=MODEL).status_code == 200
    played = gamma.post(
        "/console/models/acme/secret/playground", data={"csrf_token": csrf, "input:x": "1,2,3,4"}
    )
    assert played.status_code == 404


def test_sign_out_ends_the_session_for_good(console: Console) -> None:
    client = browser_client(console)
    sign_in(client, console.beta_key)
    cookie = client.cookies.get("modelport_console")
    assert cookie
    csrf = csrf_of(client.get("/console/models").text)
    out = client.post("/console/sign-out", data={"csrf_token": csrf}, follow_redirects=False)
    assert out.status_code == 303 and out.headers["location"] == "/console/sign-in"
    with console.services.database.transaction() as db:
        assert db.scalars(select(ConsoleSessionRow)).all() == []
    replay = browser_client(console)
    replay.cookies.set("modelport_console", cookie, path="/console")
    assert replay.get("/console/models", follow_redirects=False).status_code == 303


def test_a_revoked_key_ends_its_session(console: Console) -> None:
    client = browser_client(console)
    sign_in(client, console.beta_key)
    console.services.tenancy.revoke_key(console.beta_key_id)
    response = client.get("/console/keys", follow_redirects=False)
    assert response.status_code == 303 and "/console/sign-in" in response.headers["location"]
    with console.services.database.transaction() as db:
        assert db.scalars(select(ConsoleSessionRow)).all() == []


def test_console_routes_are_not_in_the_api_schema(console: Console) -> None:
    paths = console.platform.client.get("/api/openapi.json").json()["paths"]
    assert not [p for p in paths if p.startswith("/console")]


def test_the_platform_admin_signs_in_with_a_platform_wide_session(console: Console) -> None:
    client = browser_client(console)
    sign_in(client, ADMIN_KEY)
    with console.services.database.transaction() as db:
        [row] = db.scalars(select(ConsoleSessionRow)).all()
        assert row.tenant is None
    catalog = client.get("/console/models").text
    assert "acme/secret" in catalog and '<span class="who">platform</span>' in catalog
    csrf = csrf_of(catalog)
    # The admin is no tenant's member: the API asks whom a key would be for.
    created = client.post("/console/keys", data={"csrf_token": csrf, "name": "x"})
    assert created.status_code == 400 and "invalid_request" in created.text


def test_a_publisher_sees_its_models_and_earnings_and_no_one_elses(console: Console) -> None:
    for _ in range(2):
        assert console.platform.infer(console.beta_key, model=MODEL).status_code == 200
    console.platform.entries()
    period = datetime.now(UTC).strftime("%Y-%m")
    generated = console.platform.client.post("/api/billing/generate", json={"period": period})
    assert generated.status_code == 200, generated.text
    tenancy = console.services.tenancy
    tenancy.add_member("acme", "olga", roles=["owner"], actor="admin")
    owner_key = tenancy.create_key("acme", "olga", name="k", actor="admin").secret
    client = browser_client(console)
    sign_in(client, owner_key)
    page = client.get("/console/publisher")
    assert page.status_code == 200, page.text
    assert MODEL in page.text and "acme/secret" in page.text
    statements = re.search(r'<table id="statements">(.*?)</table>', page.text, re.S)
    assert statements and period in statements[1] and "$0.005000" in statements[1]
    link = re.search(r'<a href="(/console/publisher/statements/\d+)">', statements[1])
    assert link, statements[1]
    lines = re.search(r'<table id="statement-lines">(.*?)</table>', client.get(link[1]).text, re.S)
    assert lines and f"<td>{MODEL}</td><td>1</td><td>prediction</td><td>2</td>" in lines[1]
    gamma = browser_client(console)
    sign_in(gamma, console.gamma_key)
    theirs = gamma.get("/console/publisher").text
    assert "No statements yet" in theirs and MODEL not in theirs


def test_without_a_secret_key_sign_in_says_why(console: Console) -> None:
    """A distributed installation without MODELPORT_SECRET_KEY cannot seal a session."""
    services = console.services
    services.console_sessions = ConsoleSessions(
        services.database, SecretBox([]), ttl_seconds=60, now=services.clock.now
    )
    client = browser_client(console)
    form = client.get("/console/sign-in")
    refused = client.post(
        "/console/sign-in",
        data={"csrf_token": csrf_of(form.text), "api_key": console.beta_key},
        follow_redirects=False,
    )
    assert refused.status_code == 503 and "secret_key_required" in refused.text
    assert "modelport_console=" not in refused.headers.get("set-cookie", "")
