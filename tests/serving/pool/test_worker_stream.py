"""The wire form of a generative stream on the gateway → worker hop: what the gateway
encodes, the worker reads back whole (and the chunks the other way); pure, no server."""

from __future__ import annotations

import pytest

from modelport.api.grpc import oip_pb2 as pb
from modelport.api.grpc.worker_stream import (
    decode_chunk,
    encode_chunk,
    encode_stream_request,
    parse_stream_request,
)
from modelport.errors import InvalidInput
from modelport.manifest import parse_manifest
from modelport.runtime.types import ChatMessage, Priority, ToolCall
from modelport.serving.types import StreamChunk, StreamRequest, VersionRef

MANIFEST = parse_manifest(
    {
        "format": "transformers",
        "files": [{"path": "model.safetensors", "digest": "sha256:" + "0" * 64, "size": 1}],
        "inputs": [{"name": "messages", "datatype": "BYTES", "shape": [1]}],
        "outputs": [{"name": "tokens", "datatype": "INT64", "shape": [-1]}],
        "license": "MIT",
        "runtime": {"task": "chat"},
    }
)
VERSION = VersionRef("acme/llama", "1", "sha256:" + "1" * 64, MANIFEST)


def wire(message: pb.ModelInferRequest) -> pb.ModelInferRequest:
    return pb.ModelInferRequest.FromString(message.SerializeToString())


@pytest.mark.parametrize(
    "request_",
    [
        StreamRequest(VERSION, "the quick brown fox", 7, 0.0, task="completions"),
        StreamRequest(
            VERSION,
            "",
            12,
            0.0,
            task="chat",
            parameters={"temperature": 0.0, "stop": ["\n"], "seed": 3},
            request_id="r-1",
            messages=(
                ChatMessage("system", "be brief"),
                ChatMessage("assistant", "", tool_calls=(ToolCall("c1", "sum", '{"a": 1}'),)),
                ChatMessage("tool", "1", tool_call_id="c1"),
                ChatMessage("user", "héllo ✓"),
            ),
            n=2,
            to_context_end=True,
            priority=Priority.BATCH,
        ),
    ],
)
def test_a_stream_request_reaches_the_worker_whole(request_: StreamRequest) -> None:
    parsed = parse_stream_request(
        wire(encode_stream_request(request_)), VERSION, deadline=42.0, call_id="call-9"
    )
    # The deadline is the worker's own (from the gRPC deadline); the call id its metadata's.
    assert parsed == StreamRequest(
        **{**request_.__dict__, "deadline": 42.0, "call_id": "call-9"}  # type: ignore[arg-type]
    )


@pytest.mark.parametrize(
    "chunk",
    [
        StreamChunk(0, "", 0, "local", input_tokens=5),
        StreamChunk(
            3,
            " wörld",
            2,
            "local",
            finish_reason="length",
            choice=1,
            logprobs=(-0.5, -1.25),
            compute_seconds=0.25,
        ),
    ],
)
def test_a_chunk_reaches_the_gateway_whole(chunk: StreamChunk) -> None:
    sent = pb.ModelStreamInferResponse.FromString(encode_chunk(chunk, VERSION).SerializeToString())
    assert decode_chunk(sent, "worker:w1") == StreamChunk(
        **{**chunk.__dict__, "backend": "worker:w1"}  # type: ignore[arg-type]
    )


def test_a_malformed_request_is_refused_with_a_code() -> None:
    message = encode_stream_request(StreamRequest(VERSION, "x", 1, 0.0))
    del message.raw_input_contents[:]
    with pytest.raises(InvalidInput) as refused:
        parse_stream_request(message, VERSION, 1.0, "")
    assert refused.value.code == "invalid_request"
    message = encode_stream_request(StreamRequest(VERSION, "x", 1, 0.0))
    message.raw_input_contents[0] = b"\x09\x00\x00\x00x"  # says 9 bytes, holds 1
    with pytest.raises(InvalidInput):
        parse_stream_request(message, VERSION, 1.0, "")
