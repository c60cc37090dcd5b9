"""A tenant's logged predictions in a real browser (headless Chromium) against a live
server: its owner reads the retention, dismisses the deletion's confirm dialog (nothing
is deleted), then accepts it and sees the deletion done and in the audit list, while
another tenant's records stay."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest
from sqlalchemy import select

from modelport.store.tables import PredictionRow
from tests.conftest import LiveServer
from tests.console.conftest import Console
from tests.console.test_browser import browser, live, shot, sign_in
from tests.console.test_operations_pages import insert, owner_key, records

pytestmark = pytest.mark.slow
__all__ = ["browser", "live"]  # fixtures, used by name


def kept(console: Console) -> set[str]:
    with console.services.database.transaction() as session:
        return set(session.scalars(select(PredictionRow.id)))


def test_an_owner_deletes_the_tenants_logged_predictions_after_confirming(
    live: tuple[Console, LiveServer], browser: object, tmp_path: Path
) -> None:
    console, server = live
    now = datetime.now(UTC)
    insert(console, records(3, endpoint="e", version="1", at=now, prefix="beta-", tenant="beta"))
    insert(console, records(2, endpoint="e", version="1", at=now, prefix="gamma-", tenant="gamma"))
    page = browser.new_context(viewport={"width": 1280, "height": 900}).new_page()  # type: ignore[attr-defined]
    sign_in(page, server.url, owner_key(console, "beta", "bob"))
    page.get_by_role("link", name="Usage & spend").click()
    page.wait_for_url("**/console/usage")
    page.get_by_role("link", name="Your logged predictions", exact=False).click()
    page.wait_for_url("**/console/data")
    assert page.locator("#retention-days").inner_text() == "90 days (the installation's default)"

    page.get_by_label("Type beta to confirm").fill("beta")
    page.once("dialog", lambda dialog: dialog.dismiss())  # changed their mind
    page.get_by_role("button", name="Delete logged predictions").click()
    assert page.url.endswith("/console/data")
    assert len(kept(console)) == 5

    page.once("dialog", lambda dialog: dialog.accept())
    page.get_by_role("button", name="Delete logged predictions").click()
    page.wait_for_url("**/console/data?deleted=3&jobs=0")
    assert page.locator("#deleted").inner_text() == (
        "3 logged predictions were deleted, and the inputs and outputs of 0 jobs erased."
    )
    assert (
        "erased 0 jobs, 0 jobs_unfinished, 3 predictions" in page.locator("#deletions").inner_text()
    )
    assert kept(console) == {"gamma-00000", "gamma-00001"}
    shot(page, tmp_path, "tenant-data-deleted")
