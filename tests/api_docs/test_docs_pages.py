"""``/api/docs`` (Swagger UI) and ``/api/redoc`` load everything from this server: no CDN,
so they work air-gapped; the OAuth2 redirect page Swagger UI points at is served."""

from __future__ import annotations

import re

import pytest
from starlette.testclient import TestClient

EXTERNAL = re.compile(r"""(?:src|href)=["'](https?:)?//""")


@pytest.mark.parametrize("page", ["/api/docs", "/api/redoc"])
def test_pages_load_their_assets_from_the_server(anon: TestClient, page: str) -> None:
    response = anon.get(page)
    assert response.status_code == 200
    html = response.text
    assert not EXTERNAL.search(html), "a script, style or icon from another host"
    assert "/api/openapi.json" in html
    assets = re.findall(r"""(?:src|href)=["'](/[^"']+)["']""", html)
    assert assets, "the page names its assets"
    for asset in assets:
        fetched = anon.get(asset)
        assert fetched.status_code == 200, asset
        assert len(fetched.content) > 1000, asset


def test_swagger_ui_is_version_5_which_reads_openapi_3_1(anon: TestClient) -> None:
    bundle = anon.get("/api/docs/assets/swagger-ui-bundle.js")
    assert bundle.status_code == 200
    assert bundle.headers["content-type"].startswith(("application/javascript", "text/javascript"))
    assert re.search(rb'"5\.\d+\.\d+"', bundle.content)


def test_the_oauth2_redirect_page_is_served(anon: TestClient) -> None:
    html = anon.get("/api/docs").text
    redirect = re.search(r"oauth2RedirectUrl: window\.location\.origin \+ '([^']+)'", html)
    assert redirect is not None
    assert redirect.group(1) == "/api/docs/oauth2-redirect"
    page = anon.get(redirect.group(1))
    assert page.status_code == 200
    assert "oauth2" in page.text.lower()


def test_an_unknown_asset_is_a_404(anon: TestClient) -> None:
    assert anon.get("/api/docs/assets/no-such.js").status_code == 404
