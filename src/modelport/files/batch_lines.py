"""OpenAI's batch input format: one JSON object a line, ``{"custom_id", "method":
"POST", "url", "body"}``, with ``custom_id`` unique in the file and one ``url`` for
the whole file, one of the generative and embedding routes of ``/v1``.

A file that breaks a rule is refused whole (``invalid_batch_file``), naming the first
line at fault: a batch never starts on requests that could not all be read."""

from __future__ import annotations

from collections.abc import Generator, Iterable, Iterator

import orjson

from modelport.errors import InvalidInput
from modelport.files.types import BatchLine

BATCH_URLS = frozenset({"/v1/chat/completions", "/v1/completions", "/v1/embeddings"})
MAX_CUSTOM_ID = 512
MAX_LINE_BYTES = 64 << 20
"""Longest line (one request) of a batch file, the default bound of an inference
request's body: a longer one is refused, naming it, before it is held whole."""


def _refuse(number: int, problem: str) -> InvalidInput:
    return InvalidInput(f"line {number} of the batch file: {problem}", code="invalid_batch_file")


def parse_line(number: int, raw: bytes) -> BatchLine:
    """Line ``number`` (from 1) of a batch file, checked."""
    try:
        doc = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise _refuse(number, f"not JSON ({exc})") from None
    if not isinstance(doc, dict):
        raise _refuse(number, "not a JSON object")
    unknown = set(doc) - {"custom_id", "method", "url", "body"}
    if unknown:
        raise _refuse(number, f"unknown field(s) {sorted(unknown)}")
    custom_id, method, url, body = (doc.get(k) for k in ("custom_id", "method", "url", "body"))
    if not isinstance(custom_id, str) or not custom_id or len(custom_id) > MAX_CUSTOM_ID:
        raise _refuse(number, f"custom_id must be a string of 1 to {MAX_CUSTOM_ID} characters")
    if method != "POST":
        raise _refuse(number, "method must be POST")
    if url not in BATCH_URLS:
        raise _refuse(number, f"url must be one of {sorted(BATCH_URLS)}")
    if not isinstance(body, dict) or not isinstance(body.get("model"), str):
        raise _refuse(number, "body must be an object naming its model")
    return BatchLine(custom_id, method, url, body)


def _too_long(number: int, bound: int) -> InvalidInput:
    return _refuse(number, f"longer than {bound} bytes")


def iter_lines(data: bytes, max_line: int = MAX_LINE_BYTES) -> Iterator[tuple[int, bytes]]:
    """The non-blank lines of ``data`` with their numbers (from 1); a line longer than
    ``max_line`` bytes is refused (``invalid_batch_file``)."""
    for number, raw in enumerate(data.split(b"\n"), start=1):
        if len(raw) > max_line:
            raise _too_long(number, max_line)
        if raw.strip():
            yield number, raw


def iter_stream_lines(
    chunks: Iterable[bytes], max_line: int = MAX_LINE_BYTES
) -> Generator[tuple[int, bytes]]:
    """``iter_lines`` over bytes that arrive in chunks: holds one chunk and the line it
    cuts (at most ``max_line`` bytes of it: a longer line is refused as soon as it is
    seen to be), never the whole file. A line cut by many chunks is joined once."""
    held: list[bytes] = []
    number, size = 0, 0
    for chunk in chunks:
        start = 0
        while (end := chunk.find(b"\n", start)) >= 0:
            number += 1
            size += end - start
            if size > max_line:
                raise _too_long(number, max_line)
            raw = b"".join((*held, chunk[start:end])) if held else chunk[start:end]
            held, size = [], 0
            if raw.strip():
                yield number, raw
            start = end + 1
        if start < len(chunk):
            size += len(chunk) - start
            if size > max_line:
                raise _too_long(number + 1, max_line)
            held.append(chunk[start:])
    raw = b"".join(held)
    if raw.strip():
        yield number + 1, raw


def check_batch_file(data: bytes) -> int:
    """Check every line of a batch file; the number of requests in it."""
    seen: set[str] = set()
    url: str | None = None
    count = 0
    for number, raw in iter_lines(data):
        line = parse_line(number, raw)
        if line.custom_id in seen:
            raise _refuse(number, f"custom_id {line.custom_id!r} is used twice")
        seen.add(line.custom_id)
        if url is None:
            url = line.url
        elif line.url != url:
            raise _refuse(number, f"url {line.url} differs from the file's {url}")
        count += 1
    if count == 0:
        raise InvalidInput("the batch file holds no request", code="invalid_batch_file")
    return count
