"""State shared by CLI commands: the terminal and a lazily built client of the server."""

from __future__ import annotations

from functools import cached_property
from typing import Any

import httpx

from modelport.cli.terminal import Terminal
from modelport.client import Client
from modelport.client.errors import error_from_response
from modelport.client.transport import DEFAULT_URL


class Application:
    def __init__(
        self,
        *,
        url: str,
        api_key: str,
        as_json: bool = False,
        wide: bool = False,
        debug: bool = False,
    ) -> None:
        self.raw_url = url or DEFAULT_URL
        self.api_key = api_key
        self.debug = debug
        self.terminal = Terminal(as_json=as_json, wide=wide)

    @cached_property
    def client(self) -> Client:
        """Built on first use: a bad URL is then reported by the command that needs it."""
        return Client(self.raw_url, self.api_key)

    @property
    def url(self) -> str:
        return self.client.url

    @property
    def http(self) -> httpx.Client:
        return self.client.http

    def check(self, response: httpx.Response) -> Any:
        """The JSON body of a successful response; an error answer raises its ``ApiError``
        (printed on one line by the command group)."""
        if response.is_success:
            return response.json() if response.content else None
        raise error_from_response(response)
