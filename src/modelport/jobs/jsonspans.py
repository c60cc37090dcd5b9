"""A stored JSON document read by byte spans, for stage outputs too big to parse whole.

``JsonSpans`` finds the members of an object or array by scanning its bytes in the
store's chunks: it follows only strings and the nesting of brackets and braces, so the
inside of a long array of numbers is skipped at the speed of a regular expression
search, never turned into Python objects. Small values are then parsed alone
(``load``); big ones are copied as they are (``stream``). Malformed JSON is refused
(``invalid_job_input``) where the scan can tell; a value copied as it is is not checked.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import orjson

from modelport.blobs.service import BlobRanges, BlobService
from modelport.errors import InvalidInput

__all__ = ["JsonSpans", "Span", "open_object"]

_AT_MEMBER = re.compile(rb'[\[\]{}",]')
"""Inside the container scanned: what nests, opens a string or ends a member."""
_DEEPER = re.compile(rb'[\[\]{}"]')
"""Further in: only what nests or opens a string (a string may hold a bracket)."""
_IN_STRING = re.compile(rb'["\\]')
_KEY_BYTES = 1 << 16
"""The longest object key read: a stage output's keys are names."""
_WHITESPACE = b" \t\r\n"


@dataclass(frozen=True)
class Span:
    """Bytes ``[start, end)`` of the document."""

    start: int
    end: int

    @property
    def size(self) -> int:
        return self.end - self.start


def _malformed(problem: str) -> InvalidInput:
    return InvalidInput(f"not a JSON document: {problem}", code="invalid_job_input")


class JsonSpans:
    """Spans of one stored document (see the module docstring). Blocking: use it on a
    worker thread."""

    def __init__(self, ranges: BlobRanges) -> None:
        self.ranges = ranges

    @property
    def whole(self) -> Span:
        return Span(0, self.ranges.size)

    def object(self, span: Span, chunks: Iterable[bytes] | None = None) -> dict[str, Span]:
        """The members of the object at ``span``: each key's value span (a key given
        twice: its last value, as a JSON parser keeps). ``chunks``: the span's bytes when
        the caller already streams them (a verified read)."""
        opener, members = self._members(span, chunks)
        if opener != ord("{"):
            raise _malformed("an object was expected")
        found: dict[str, Span] = {}
        for member in members:
            key, value = self._key(member)
            found[key] = value
        return found

    def array(self, span: Span) -> list[Span]:
        """The items of the array at ``span``."""
        opener, items = self._members(span, None)
        if opener != ord("["):
            raise _malformed("an array was expected")
        return items

    def load(self, span: Span) -> Any:
        """The value at ``span``, parsed (keep it to small values)."""
        try:
            return orjson.loads(self.ranges.read(span.start, span.end))
        except orjson.JSONDecodeError as exc:
            raise _malformed(str(exc)) from exc

    def stream(self, span: Span) -> Iterator[bytes]:
        """The bytes at ``span`` in the store's chunks."""
        return self.ranges.stream(span.start, span.end)

    # ---- parts
    def _members(self, span: Span, chunks: Iterable[bytes] | None) -> tuple[int, list[Span]]:
        """The opening byte of the container at ``span`` and its members' spans."""
        source = self.stream(span) if chunks is None else chunks
        opener, members = _scan(source, span.start)
        if len(members) == 1 and self._blank(members[0]):
            return opener, []  # ``[]`` or ``{}``
        return opener, members

    def _blank(self, span: Span) -> bool:
        return span.size <= 64 and not self.ranges.read(span.start, span.end).strip(_WHITESPACE)

    def _key(self, member: Span) -> tuple[str, Span]:
        head = self.ranges.read(member.start, min(member.end, member.start + _KEY_BYTES))
        at = len(head) - len(head.lstrip(_WHITESPACE))
        if head[at : at + 1] != b'"':
            raise _malformed("an object member without a key")
        end = at + 1
        while True:
            found = _IN_STRING.search(head, end)
            if found is None:
                raise _malformed("an object key too long or not closed")
            if head[found.start()] == ord("\\"):
                end = found.start() + 2
                continue
            end = found.end()
            break
        rest = head[end:].lstrip(_WHITESPACE)
        if rest[:1] != b":":
            raise _malformed("an object member without ':'")
        try:
            key = orjson.loads(head[at:end])
        except orjson.JSONDecodeError as exc:
            raise _malformed(str(exc)) from exc
        colon = member.start + len(head) - len(rest)
        return key, Span(colon + 1, member.end)


def open_object(blobs: BlobService, digest: str) -> tuple[JsonSpans, dict[str, Span]]:
    """The stored document ``digest`` and its top-level members (``JsonSpans.object``),
    verified: a small blob is hashed first (``BlobService.open_ranges``), a big one
    while this first scan streams all of it (cut off before its end on a mismatch); the
    later ranged reads are checked against its size."""
    ranges = blobs.open_ranges(digest)
    doc = JsonSpans(ranges)
    whole = ranges.blob
    verified = blobs.read(whole) if whole.size > blobs.verify_below_bytes else None
    return doc, doc.object(doc.whole, verified)


def _scan(chunks: Iterable[bytes], offset: int) -> tuple[int, list[Span]]:
    """Scan the array or object whose text starts at ``offset`` (``chunks`` from there):
    its opening byte and its members' spans (an object's as ``"key":value``)."""
    depth = 0
    in_string = False
    escaped = False  # a backslash ended the previous chunk: skip the byte it escapes
    opener = 0
    members: list[Span] = []
    start = at = offset
    for chunk in chunks:
        i, size = (1, len(chunk)) if escaped else (0, len(chunk))
        escaped = False
        while i < size:
            if in_string:
                found = _IN_STRING.search(chunk, i)
                if found is None:
                    break
                j = found.start()
                if chunk[j] == ord("\\"):
                    escaped = j + 1 >= size
                    i = j + 2
                    continue
                in_string, i = False, j + 1
                continue
            found = (_AT_MEMBER if depth == 1 else _DEEPER).search(chunk, i)
            if found is None:
                break
            j = found.start()
            byte, i = chunk[j], j + 1
            if depth == 0 and (byte not in b"[{" or chunk[:j].strip(_WHITESPACE)):
                raise _malformed("an array or object was expected")
            if byte == ord('"'):
                in_string = True
            elif byte in b"[{":
                if depth == 0:
                    opener, start = byte, at + j + 1
                depth += 1
            elif byte in b"]}":
                depth -= 1
                if depth == 0:
                    members.append(Span(start, at + j))
                    return opener, members
            else:  # a comma between two members
                members.append(Span(start, at + j))
                start = at + j + 1
        at += size
    raise _malformed("it ends inside an array or object")
