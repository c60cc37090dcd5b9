"""A generative version's examples: a prompt or a chat with the tokens greedy decoding
must produce, in the manifest's tensor form (no schema of its own)::

    {"inputs":  [{"name": "prompt",   "datatype": "BYTES", "shape": [1], "data": ["Once"]}],
     "outputs": [{"name": "tokens",   "datatype": "INT64", "shape": [3], "data": [7, 8, 9]},
                 {"name": "text",     "datatype": "BYTES", "shape": [1], "data": [" upon a"]}]}

A chat is the input ``messages``: one BYTES element holding the JSON list of
``{"role", "content"}`` objects. ``tokens`` is required; ``text`` (the tokens decoded)
is checked when present. Validation decodes greedily from a fixed seed, as many
tokens as expected (in the sandboxed validation process), and the platform compares
them exactly: one token off fails the example.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from modelport.errors import InvalidInput
from modelport.manifest import Example
from modelport.runtime.examples import ExampleResult
from modelport.runtime.formats.transformers.greedy import Greedy, generate_greedy
from modelport.runtime.types import ChatMessage

if TYPE_CHECKING:
    from modelport.runtime.formats.transformers.loading import LoadedCausalLM

PROMPT = "prompt"
MESSAGES = "messages"
TOKENS = "tokens"
TEXT = "text"


def one_text(example: Example, name: str) -> str | None:
    tensor = next((t for t in example.inputs if t.name == name), None)
    if tensor is None:
        return None
    if tensor.datatype != "BYTES" or len(tensor.data) != 1 or not isinstance(tensor.data[0], str):
        raise InvalidInput(f"example input '{name}' must be one BYTES string", code="bad_example")
    return tensor.data[0]


def parse_messages(raw: str) -> tuple[ChatMessage, ...]:
    """A chat from its JSON form (a list of ``{"role", "content"}``)."""
    try:
        items = json.loads(raw)
    except ValueError:
        items = None
    if (
        not isinstance(items, list)
        or not items
        or not all(
            isinstance(m, dict)
            and isinstance(m.get("role"), str)
            and isinstance(m.get("content"), str)
            for m in items
        )
    ):
        raise InvalidInput(
            "example input 'messages' must be a JSON list of {role, content} strings",
            code="bad_example",
        )
    return tuple(ChatMessage(m["role"], m["content"]) for m in items)


def expected_tokens(example: Example) -> list[int]:
    """The tokens greedy decoding must produce for the example."""
    expected = next((t for t in example.outputs if t.name == TOKENS), None)
    if expected is None or not expected.data:
        raise InvalidInput(
            "a generative example needs the expected output 'tokens'", code="bad_example"
        )
    return [int(t) for t in expected.data]


def generate_example(loaded: LoadedCausalLM, example: Example) -> dict[str, np.ndarray]:
    """Decode the example's prompt (or chat) greedily, as many tokens as it expects: the
    outputs ``tokens`` (INT64) and ``text`` (one UTF-8 byte string) to compare."""
    prompt = one_text(example, PROMPT)
    chat = one_text(example, MESSAGES)
    if (prompt is None) == (chat is None):
        raise InvalidInput(
            "a generative example has one input: 'prompt' or 'messages'", code="bad_example"
        )
    got = generate_greedy(
        loaded.model,
        loaded.tokenizer,
        prompt=prompt,
        messages=parse_messages(chat) if chat is not None else None,
        max_tokens=len(expected_tokens(example)),
    )
    text = np.empty(1, dtype=np.object_)
    text[0] = got.text.encode()
    return {TOKENS: np.asarray(got.tokens, dtype=np.int64), TEXT: text}


def compare_generated(
    example: Example, outputs: Mapping[str, np.ndarray], index: int
) -> ExampleResult:
    """Compare what ``generate_example`` answered with the example's expected tokens
    (exactly: one token off fails) and text (when the example has it)."""
    want = expected_tokens(example)
    expected_text = next((t for t in example.outputs if t.name == TEXT), None)
    tokens, text_tensor = outputs.get(TOKENS), outputs.get(TEXT)
    if tokens is None or tokens.dtype.kind not in "iu" or tokens.ndim != 1:
        return ExampleResult(index, False, ["output 'tokens' is not a vector of token ids"])
    got = [int(t) for t in tokens.tolist()]
    problems = []
    got_text: str | None = None
    if expected_text is not None:
        if (
            text_tensor is None
            or text_tensor.shape != (1,)
            or not isinstance(text_tensor[0], bytes)
        ):
            problems.append("output 'text' is not one string")
        else:
            try:
                got_text = text_tensor[0].decode()
            except UnicodeDecodeError:
                problems.append("output 'text' is not UTF-8")
    if got != want:
        at = next(
            (i for i, (a, b) in enumerate(zip(got, want, strict=False)) if a != b),
            min(len(got), len(want)),
        )
        problems.append(f"output 'tokens': {got} != expected {want} (first difference at {at})")
    if (
        expected_text is not None
        and got_text is not None
        and (len(expected_text.data) != 1 or expected_text.data[0] != got_text)
    ):
        problems.append(f"output 'text': {got_text!r} != expected {expected_text.data!r}")
    return ExampleResult(index=index, passed=not problems, problems=problems)


def example_from(
    greedy: Greedy, *, prompt: str | None = None, chat: list[dict[str, str]] | None = None
) -> dict[str, Any]:
    """The manifest example that records ``greedy``'s output for that prompt or chat."""
    if chat is not None:
        given = {"name": MESSAGES, "datatype": "BYTES", "shape": [1], "data": [json.dumps(chat)]}
    else:
        given = {"name": PROMPT, "datatype": "BYTES", "shape": [1], "data": [prompt or ""]}
    tokens = list(greedy.tokens)
    return {
        "inputs": [given],
        "outputs": [
            {"name": TOKENS, "datatype": "INT64", "shape": [len(tokens)], "data": tokens},
            {"name": TEXT, "datatype": "BYTES", "shape": [1], "data": [greedy.text]},
        ],
    }
