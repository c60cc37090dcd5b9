"""Incremental detokenization and stop conditions of one sequence.

Text is decoded as tokens come (vLLM's prefix/read offsets: only a short window is
re-decoded per token, and a character cut in the middle of its bytes waits for the
next token). Stop strings are matched on the decoded text; text that could be the
beginning of a stop string is held back until the next tokens tell, so a client never
receives part of a stop string. End-of-sequence tokens end a sequence with ``stop``
and add no text.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any


def eos_token_ids(tokenizer: Any, generation_config: Any = None) -> frozenset[int]:
    """The tokens that end a sequence: the generation config's ``eos_token_id`` (an id or
    a list) and the tokenizer's."""
    ids: set[int] = set()
    for source in (getattr(generation_config, "eos_token_id", None), tokenizer.eos_token_id):
        if isinstance(source, int):
            ids.add(source)
        elif isinstance(source, Iterable):
            ids.update(int(i) for i in source)
    return frozenset(ids)


class IncrementalDetokenizer:
    """Text of a growing list of output tokens, decoded in small windows."""

    def __init__(self, tokenizer: Any, prompt_ids: list[int]) -> None:
        self._tokenizer = tokenizer
        # A few prompt tokens give the first output token its context (a leading space
        # is decoded differently at the start of a text).
        self.ids: list[int] = list(prompt_ids[-5:])
        self._prefix = 0
        self._read = len(self.ids)

    def push(self, token: int) -> str:
        """Add ``token``; the new text it completes (possibly empty)."""
        self.ids.append(token)
        decode = self._tokenizer.decode
        before = decode(self.ids[self._prefix : self._read], skip_special_tokens=True)
        after = decode(self.ids[self._prefix :], skip_special_tokens=True)
        if len(after) > len(before) and not after.endswith("\ufffd"):
            self._prefix, self._read = self._read, len(self.ids)
            return str(after[len(before) :])
        return ""

    def flush(self) -> str:
        """At the end: the text still waiting for the rest of a character (decoded as
        the replacement character, as a full decode would)."""
        decode = self._tokenizer.decode
        before = decode(self.ids[self._prefix : self._read], skip_special_tokens=True)
        after = decode(self.ids[self._prefix :], skip_special_tokens=True)
        self._prefix = self._read = len(self.ids)
        return str(after[len(before) :]) if len(after) > len(before) else ""


@dataclass
class StopText:
    """Output text of one sequence: what may be sent now, and whether a stop string ended
    it."""

    stops: tuple[str, ...] = ()
    text: str = ""
    sent: int = 0
    """Characters of ``text`` handed out."""
    stopped: bool = False
    _longest: int = field(init=False, default=0)

    def __post_init__(self) -> None:
        self._longest = max((len(s) for s in self.stops), default=0)

    def add(self, delta: str) -> str:
        """Append ``delta``; the text that can be sent now. After a stop string matched
        (``stopped``), the text before it and nothing more."""
        if self.stopped:
            return ""
        self.text += delta
        if not self.stops:
            return self._send(len(self.text))
        # A stop may begin anywhere in the unsent text (what was sent could not begin one).
        hits = [i for i in (self.text.find(s, self.sent) for s in self.stops) if i >= 0]
        if hits:
            self.stopped = True
            return self._send(min(hits))
        return self._send(len(self.text) - self._held())

    def flush(self) -> str:
        """At the end of the sequence: the held-back text (it began no stop string)."""
        return "" if self.stopped else self._send(len(self.text))

    def _held(self) -> int:
        """Length of the longest end of the unsent text that begins a stop string."""
        unsent = len(self.text) - self.sent
        for size in range(min(self._longest - 1, unsent), 0, -1):
            tail = self.text[-size:]
            if any(s.startswith(tail) for s in self.stops):
                return size
        return 0

    def _send(self, end: int) -> str:
        piece = self.text[self.sent : end]
        self.sent = max(self.sent, end)
        return piece
