"""State shared by CLI commands: the terminal and a lazily built HTTP client."""

from __future__ import annotations

from functools import cached_property
from typing import Any

import httpx

from modelport.cli.terminal import Terminal


class Application:
    def __init__(self, *, url: str, api_key: str, as_json: bool = False) -> None:
        self.url = url.rstrip("/")
        self.api_key = api_key
        self.terminal = Terminal(as_json=as_json)

    @cached_property
    def http(self) -> httpx.Client:
        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        return httpx.Client(base_url=self.url, headers=headers, timeout=httpx.Timeout(60.0))

    def check(self, response: httpx.Response) -> Any:
        """Return the JSON body of a successful response, or abort with the problem's detail."""
        if response.is_success:
            return response.json() if response.content else None
        try:
            body = response.json()
            detail = f"{body.get('detail') or body.get('error')} ({body.get('code', response.status_code)})"
        except ValueError:
            detail = f"HTTP {response.status_code}: {response.text[:200]}"
        self.terminal.abort(detail)
