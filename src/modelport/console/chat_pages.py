"""The chat box of a generative model: the conversation posted by the page, answered by
``/v1/chat/completions`` streamed, and passed on to the page as JSON lines as the
tokens come (``{"delta": …}``, then ``{"done": true, "model": …, …}`` or ``{"error": …}``).
With the routing box ticked, the model's task alias is called (``route:<task>``): the
``done`` line names the version that served it and prices the tokens at its rules."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote

from fastapi import APIRouter
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse

from modelport.console.calls import PlatformAPI, Stream
from modelport.console.pricing import Rule, price_of_tokens_micros, rules_at
from modelport.console.routed_calls import (
    ROUTE_PREFIX,
    route_form,
    route_preferences,
    route_task,
)
from modelport.console.web import checked_form, current_session, platform
from modelport.errors import InvalidInput

router = APIRouter()

BAD_CHAT = "invalid_chat"
MAX_TURNS = 50
MAX_CHARS = 20_000
ROLES = {"user", "assistant"}


def _conversation(text: str) -> list[dict[str, str]] | None:
    """The posted turns, when well formed: a list of {role, content}, ending with the
    person's."""
    try:
        turns = json.loads(text)
    except ValueError:
        return None
    if not isinstance(turns, list) or not 0 < len(turns) <= MAX_TURNS:
        return None
    kept = []
    for turn in turns:
        if not isinstance(turn, dict):
            return None
        role, content = turn.get("role"), turn.get("content")
        if role not in ROLES or not isinstance(content, str) or len(content) > MAX_CHARS:
            return None
        kept.append({"role": role, "content": content})
    return kept if kept[-1]["role"] == "user" and kept[-1]["content"].strip() else None


def _line(obj: dict[str, Any]) -> bytes:
    return json.dumps(obj).encode() + b"\n"


def _events(buffer: bytearray) -> list[dict[str, Any] | None]:
    """Whole server-sent events taken off ``buffer``: their JSON data, None for
    ``[DONE]``."""
    found: list[dict[str, Any] | None] = []
    while (end := buffer.find(b"\n\n")) >= 0:
        event, rest = bytes(buffer[:end]), buffer[end + 2 :]
        buffer[:] = rest
        for line in event.split(b"\n"):
            if line.startswith(b"data:"):
                data = line[5:].strip()
                found.append(None if data == b"[DONE]" else json.loads(data))
    return found


async def _latest_version(api: PlatformAPI, owner: str, name: str) -> str | None:
    """The version a model's page shows first (its latest), or None when none is listed
    (the call then names the model alone and the API answers why)."""
    ref = f"{quote(owner, safe='')}/{quote(name, safe='')}"
    versions = await api.get(f"/api/models/{ref}/versions")
    items = versions.body.get("items", []) if versions.ok else []
    return str(items[-1]["version"]) if items else None


async def _route_task(api: PlatformAPI, owner: str, name: str) -> str | None:
    """The task alias of the model (its catalog task), None when it has none."""
    found = await api.get(f"/api/models/{quote(owner, safe='')}/{quote(name, safe='')}")
    return route_task(found.body.get("task")) if found.ok else None


@router.post("/models/{owner}/{name}/chat")
async def chat(owner: str, name: str, request: Request) -> Response:
    session = await current_session(request)
    form = await checked_form(request, session)
    turns = _conversation(form.get("messages", ""))
    if turns is None:
        return JSONResponse(
            {"error": "the conversation is not well formed", "code": BAD_CHAT}, status_code=400
        )
    model = f"{owner}/{name}"
    api = platform(request, session)
    typed = route_form(form)
    task = await _route_task(api, owner, name) if typed.on else None
    body: dict[str, Any] = {
        "messages": turns,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    if task is not None:
        # The model's task alias: the answer's chunks name the version that served it,
        # and the price quoted is that version's.
        try:
            body["route"] = route_preferences(typed)
        except InvalidInput as refused:
            return JSONResponse({"error": refused.message, "code": refused.code}, status_code=400)
        body["model"] = ROUTE_PREFIX + task
        rules: list[Rule] = []
    else:
        # The version the page shows, named in the call: the price quoted is that version's.
        version = request.query_params.get("version") or await _latest_version(api, owner, name)
        rules = await rules_at(api, model, version, datetime.now(UTC)) if version else []
        body["model"] = f"{model}:{version}" if version else model
    stream = Stream(
        request.app, session.credential, "/v1/chat/completions", json.dumps(body).encode()
    )
    started = time.perf_counter()
    status = await stream.open()
    if status != 200:
        raw = b"".join([chunk async for chunk in stream.chunks()])
        await stream.close()
        try:
            problem = json.loads(raw)
            error = problem.get("error", {})
            message = error.get("message") if isinstance(error, dict) else str(error)
            code = error.get("code") if isinstance(error, dict) else problem.get("code")
        except ValueError:
            message, code = f"HTTP {status}", None
        return JSONResponse(
            {"error": message or f"HTTP {status}", "code": code}, status_code=status
        )

    async def lines() -> AsyncIterator[bytes]:
        buffer = bytearray()
        usage: dict[str, int] = {}
        served = str(body["model"])
        try:
            async for chunk in stream.chunks():
                buffer += chunk
                for event in _events(buffer):
                    if event is None:
                        continue
                    if event.get("usage"):
                        usage = event["usage"]
                    if isinstance(event.get("model"), str):
                        served = event["model"]
                    for choice in event.get("choices") or []:
                        delta = (choice.get("delta") or {}).get("content")
                        if delta:
                            yield _line({"delta": delta})
            latency_ms = round((time.perf_counter() - started) * 1000, 1)
            prices = rules
            if task is not None and ":" in served and not served.startswith(ROUTE_PREFIX):
                chosen, _, chosen_version = served.rpartition(":")
                prices = await rules_at(api, chosen, chosen_version, datetime.now(UTC))
            yield _line(
                {
                    "done": True,
                    "latency_ms": latency_ms,
                    "usage": usage,
                    "model": served,
                    "price_micros": price_of_tokens_micros(prices, usage),
                }
            )
        finally:
            await stream.close()

    return StreamingResponse(
        lines(),
        media_type="application/x-ndjson",
        headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
    )
