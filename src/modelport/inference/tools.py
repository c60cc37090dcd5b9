"""Function calling for every model: OpenAI's ``tools`` and ``tool_choice`` turned into
a prompt and a grammar, and the model's answer back into ``tool_calls``.

The format is llama.cpp's generic one, which needs nothing of the model's template:
the tools are described to the model in a system message (and handed to the template,
which may render them its own way), and the answer is constrained to one JSON object,
either ``{"tool_call": {"name": ..., "arguments": {...}}}`` (the name one of the
tools, the arguments valid against that tool's parameter schema) or, where the model
may answer in words (``tool_choice`` ``auto``), ``{"response": "..."}``. Earlier
turns of a conversation are written back the same way: an assistant's tool calls as
the ``tool_call`` object it answered, a tool's result as its own message.

Pure data: the surface parses, the engine decodes under the grammar, and
``parse_answer`` reads the answer.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from modelport.errors import InvalidInput
from modelport.runtime.types import ChatMessage, ToolCall

MAX_TOOLS = 128
NONE, AUTO, REQUIRED = "none", "auto", "required"


@dataclass(frozen=True)
class Tool:
    name: str
    description: str
    parameters: Mapping[str, Any]

    def as_openai(self) -> dict[str, Any]:
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": dict(self.parameters),
            },
        }


@dataclass(frozen=True)
class ToolPlan:
    """What a request with tools asks of the engine."""

    tools: tuple[Tool, ...]
    choice: str
    """``auto``, ``required``, or the one function's name."""

    @property
    def schema(self) -> dict[str, Any]:
        """The JSON schema the answer is constrained to."""
        allowed = [t for t in self.tools if self.choice in (AUTO, REQUIRED, t.name)]
        calls = [
            {
                "type": "object",
                "properties": {
                    "name": {"const": t.name},
                    "arguments": dict(t.parameters) or {"type": "object"},
                },
                "required": ["name", "arguments"],
            }
            for t in allowed
        ]
        call = {
            "type": "object",
            "properties": {"tool_call": calls[0] if len(calls) == 1 else {"anyOf": calls}},
            "required": ["tool_call"],
        }
        if self.choice != AUTO:
            return call
        words = {
            "type": "object",
            "properties": {"response": {"type": "string"}},
            "required": ["response"],
        }
        return {"anyOf": [call, words]}

    def system_message(self) -> ChatMessage:
        listing = json.dumps([t.as_openai()["function"] for t in self.tools], indent=2)
        if self.choice == AUTO:
            how = (
                'To call a tool answer {"tool_call": {"name": <tool name>, "arguments":'
                ' {...}}}; to answer in words, {"response": <your answer>}.'
            )
        else:
            how = 'Answer {"tool_call": {"name": <tool name>, "arguments": {...}}}.'
        return ChatMessage("system", f"You may call these tools:\n{listing}\n{how}")

    def messages(self, chat: Sequence[ChatMessage]) -> tuple[ChatMessage, ...]:
        """The chat with the tools described first and earlier tool calls written in
        the answer format."""
        out = [self.system_message()]
        for m in chat:
            if m.tool_calls:
                calls = [{"name": c.name, "arguments": _object(c.arguments)} for c in m.tool_calls]
                content = json.dumps({"tool_call": calls[0]} if len(calls) == 1 else calls)
                out.append(ChatMessage(m.role, content, m.tool_calls))
            else:
                out.append(m)
        return tuple(out)


def _object(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text


def parse_tools(raw: Any, choice: Any) -> ToolPlan | None:
    """OpenAI's ``tools`` and ``tool_choice`` as a plan; None when no tool may be called
    (no tools, or ``tool_choice`` ``none``). 400 ``invalid_parameter`` naming the field."""
    if raw is None or raw == []:
        if choice not in (None, NONE, AUTO):
            raise _invalid("tool_choice needs tools", "tool_choice")
        return None
    if not isinstance(raw, list) or len(raw) > MAX_TOOLS:
        raise _invalid(f"tools must be a list of at most {MAX_TOOLS} functions", "tools")
    tools = []
    for i, item in enumerate(raw):
        function = item.get("function") if isinstance(item, dict) else None
        if (
            not isinstance(item, dict)
            or item.get("type") != "function"
            or not isinstance(function, dict)
        ):
            raise _invalid(f"tools[{i}] must be a function tool", "tools")
        name = function.get("name")
        if not isinstance(name, str) or not name or len(name) > 64:
            raise _invalid(f"tools[{i}].function.name must be 1 to 64 characters", "tools")
        parameters = function.get("parameters") or {}
        if not isinstance(parameters, dict):
            raise _invalid(f"tools[{i}].function.parameters must be a JSON schema", "tools")
        description = function.get("description") or ""
        tools.append(Tool(name, str(description), parameters))
    if len({t.name for t in tools}) != len(tools):
        raise _invalid("tools must have distinct names", "tools")
    if choice is None or choice == AUTO:
        return ToolPlan(tuple(tools), AUTO)
    if choice == NONE:
        return None
    if choice == REQUIRED:
        return ToolPlan(tuple(tools), REQUIRED)
    named = choice.get("function", {}).get("name") if isinstance(choice, dict) else None
    if not isinstance(named, str) or named not in {t.name for t in tools}:
        raise _invalid(
            "tool_choice must be none, auto, required or one of the tools", "tool_choice"
        )
    return ToolPlan(tuple(tools), named)


@dataclass(frozen=True)
class ToolAnswer:
    content: str | None
    calls: tuple[ToolCall, ...]


def parse_answer(text: str) -> ToolAnswer:
    """Read an answer made under the plan's grammar. An answer cut short (``length``)
    is not JSON: it comes back as the words it has."""
    try:
        doc = json.loads(text)
    except ValueError:
        return ToolAnswer(text, ())
    if isinstance(doc, dict) and isinstance(doc.get("tool_call"), dict):
        call = doc["tool_call"]
        name = call.get("name")
        if isinstance(name, str):
            arguments = json.dumps(call.get("arguments", {}), ensure_ascii=False)
            return ToolAnswer(None, (ToolCall("call_" + secrets.token_hex(12), name, arguments),))
    if isinstance(doc, dict) and isinstance(doc.get("response"), str):
        return ToolAnswer(doc["response"], ())
    return ToolAnswer(text, ())


def tool_calls_json(calls: Sequence[ToolCall]) -> list[dict[str, Any]]:
    return [
        {
            "id": c.id,
            "type": "function",
            "function": {"name": c.name, "arguments": c.arguments},
        }
        for c in calls
    ]


def _invalid(message: str, param: str) -> InvalidInput:
    return InvalidInput(message, code="invalid_parameter", param=param)
