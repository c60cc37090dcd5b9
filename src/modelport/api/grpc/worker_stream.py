"""The wire form of a generative stream on the pool's hop: a ``StreamRequest`` as one
OIP ``ModelInferRequest`` (the prompt as the ``text_input`` tensor, the generation's
settings as parameters) and each ``StreamChunk`` as one ``ModelStreamInferResponse``
(its text as the ``text_output`` tensor, its counts as parameters). Both ends of the
hop use it: the gateway's ``WorkerBackend.stream`` and the worker's ``ModelStreamInfer``
(server streaming: one request, the chunks back).
"""

from __future__ import annotations

import json
import struct
from dataclasses import asdict

from modelport.api.grpc import oip_pb2 as pb
from modelport.api.grpc.codec import TEXT_INPUT, TEXT_OUTPUT, parameters_of, set_parameter
from modelport.errors import InvalidInput
from modelport.runtime.types import ChatMessage, Priority, ToolCall
from modelport.serving.types import StreamChunk, StreamRequest, VersionRef

STREAM_METHOD = "ModelStreamInfer"
_GENERATION = "modelport_generation"
"""A JSON parameter: the request's sampling parameters and chat messages."""


def _text_tensor(text: str) -> bytes:
    raw = text.encode("utf-8")
    return struct.pack("<I", len(raw)) + raw


def _text_of(raw: bytes) -> str:
    if len(raw) < 4 or struct.unpack_from("<I", raw)[0] != len(raw) - 4:
        raise InvalidInput(
            "a text tensor holds one length-prefixed element", code="invalid_request"
        )
    return raw[4:].decode("utf-8")


def encode_stream_request(request: StreamRequest) -> pb.ModelInferRequest:
    """The request a gateway sends a worker for ``request``."""
    version = request.version
    message = pb.ModelInferRequest(
        model_name=version.model, model_version=version.version, id=request.request_id
    )
    message.inputs.add(name=TEXT_INPUT, datatype="BYTES", shape=[1])
    message.raw_input_contents.append(_text_tensor(request.prompt))
    params = message.parameters
    set_parameter(params["max_tokens"], request.max_tokens)
    set_parameter(params["n"], request.n)
    set_parameter(params["task"], request.task)
    set_parameter(params["to_context_end"], request.to_context_end)
    set_parameter(params["priority"], request.priority.value)
    generation = {
        "parameters": dict(request.parameters),
        "messages": None if request.messages is None else [asdict(m) for m in request.messages],
    }
    set_parameter(params[_GENERATION], json.dumps(generation, default=str))
    return message


def parse_stream_request(
    message: pb.ModelInferRequest, version: VersionRef, deadline: float, call_id: str
) -> StreamRequest:
    """The ``StreamRequest`` a worker runs for ``message`` (of ``version``)."""
    if len(message.raw_input_contents) != 1:
        raise InvalidInput("a stream sends its prompt as one text tensor", code="invalid_request")
    params = parameters_of(message.parameters)
    try:
        generation = json.loads(str(params.get(_GENERATION) or "{}"))
        messages = generation.get("messages")
        chat = (
            None
            if messages is None
            else tuple(
                ChatMessage(
                    role=m["role"],
                    content=m["content"],
                    tool_calls=tuple(ToolCall(**c) for c in m.get("tool_calls") or ()),
                    tool_call_id=m.get("tool_call_id"),
                )
                for m in messages
            )
        )
        return StreamRequest(
            version=version,
            prompt=_text_of(message.raw_input_contents[0]),
            max_tokens=int(params["max_tokens"]),
            deadline=deadline,
            task=str(params.get("task") or ""),
            parameters=dict(generation.get("parameters") or {}),
            request_id=message.id,
            call_id=call_id,
            messages=chat,
            n=int(params.get("n") or 1),
            to_context_end=bool(params.get("to_context_end")),
            priority=Priority(str(params.get("priority") or Priority.INTERACTIVE.value)),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise InvalidInput(f"a malformed stream request: {exc}", code="invalid_request") from None


def encode_chunk(chunk: StreamChunk, version: VersionRef) -> pb.ModelStreamInferResponse:
    """One chunk as a worker sends it."""
    response = pb.ModelInferResponse(model_name=version.model, model_version=version.version)
    response.outputs.add(name=TEXT_OUTPUT, datatype="BYTES", shape=[1])
    response.raw_output_contents.append(_text_tensor(chunk.text))
    params = response.parameters
    set_parameter(params["index"], chunk.index)
    set_parameter(params["output_tokens"], chunk.output_tokens)
    set_parameter(params["input_tokens"], chunk.input_tokens)
    set_parameter(params["choice"], chunk.choice)
    set_parameter(params["compute_seconds"], float(chunk.compute_seconds))
    if chunk.finish_reason is not None:
        set_parameter(params["finish_reason"], chunk.finish_reason)
    if chunk.logprobs is not None:
        set_parameter(params["logprobs"], json.dumps(list(chunk.logprobs)))
    return pb.ModelStreamInferResponse(infer_response=response)


def decode_chunk(message: pb.ModelStreamInferResponse, backend: str) -> StreamChunk:
    """A worker's chunk as the gateway's backend yields it."""
    response = message.infer_response
    params = parameters_of(response.parameters)
    logprobs = params.get("logprobs")
    finish = params.get("finish_reason")
    return StreamChunk(
        index=int(params.get("index") or 0),
        text=_text_of(response.raw_output_contents[0]) if response.raw_output_contents else "",
        output_tokens=int(params.get("output_tokens") or 0),
        backend=backend,
        input_tokens=int(params.get("input_tokens") or 0),
        finish_reason=None if finish is None else str(finish),
        choice=int(params.get("choice") or 0),
        logprobs=None if logprobs is None else tuple(json.loads(str(logprobs))),
        compute_seconds=float(params.get("compute_seconds") or 0.0),
    )
