"""A generative version's examples: a prompt or a chat with the tokens greedy decoding
must produce, in the manifest's tensor form (no schema of its own)::

    {"inputs":  [{"name": "prompt",   "datatype": "BYTES", "shape": [1], "data": ["Once"]}],
     "outputs": [{"name": "tokens",   "datatype": "INT64", "shape": [3], "data": [7, 8, 9]},
                 {"name": "text",     "datatype": "BYTES", "shape": [1], "data": [" upon a"]}]}

A chat is the input ``messages``: one BYTES element holding the JSON list of
``{"role", "content"}`` objects. ``tokens`` is required; ``text`` (the tokens decoded)
is checked when present. Validation decodes greedily from a fixed seed, as many
tokens as expected, and compares exactly: one token off fails the example.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

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


def _one_text(example: Example, name: str) -> str | None:
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


def run_generative_example(loaded: LoadedCausalLM, example: Example, index: int) -> ExampleResult:
    """Decode greedily and compare with the example's expected tokens (and text)."""
    prompt = _one_text(example, PROMPT)
    chat = _one_text(example, MESSAGES)
    if (prompt is None) == (chat is None):
        raise InvalidInput(
            "a generative example has one input: 'prompt' or 'messages'", code="bad_example"
        )
    expected = next((t for t in example.outputs if t.name == TOKENS), None)
    if expected is None or not expected.data:
        raise InvalidInput(
            "a generative example needs the expected output 'tokens'", code="bad_example"
        )
    want = [int(t) for t in expected.data]
    got = generate_greedy(
        loaded.model,
        loaded.tokenizer,
        prompt=prompt,
        messages=parse_messages(chat) if chat is not None else None,
        max_tokens=len(want),
    )
    problems = []
    if list(got.tokens) != want:
        at = next(
            (i for i, (a, b) in enumerate(zip(got.tokens, want, strict=False)) if a != b),
            min(len(got.tokens), len(want)),
        )
        problems.append(
            f"output 'tokens': {list(got.tokens)} != expected {want} (first difference at {at})"
        )
    text = next((t for t in example.outputs if t.name == TEXT), None)
    if text is not None and (len(text.data) != 1 or text.data[0] != got.text):
        problems.append(f"output 'text': {got.text!r} != expected {text.data!r}")
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
