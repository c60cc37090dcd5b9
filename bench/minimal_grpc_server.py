"""The reference for the gRPC benchmark: the same gRPC stack with no platform.

A ``grpc.aio`` server on uvloop (as ``modelport serve`` runs it) with one method,
``inference.GRPCInferenceService/ModelInfer``, over the platform's generated messages: the
row from ``raw_input_contents``, one ``session.run`` straight on the event loop (no auth,
no registry, no queue, no batching, no metering), the output as raw contents. The gap
between it and the platform's gRPC surface is the platform's work; its own figures are
what ``grpc.aio`` costs per call.

    .venv/bin/python bench/minimal_grpc_server.py --port 8001 --model mlp.onnx
"""

from __future__ import annotations

import argparse
import os

import grpc
import numpy as np
import onnxruntime as ort
import uvloop

from modelport.api.grpc import oip_pb2 as pb


async def serve(port: int, model_path: str) -> None:
    options = ort.SessionOptions()
    # One intra-op thread, as the platform gives its sessions on this 2-core machine
    # (one fewer than the CPUs): spinning pool threads would bill the server CPU column.
    options.intra_op_num_threads = max(1, (os.cpu_count() or 2) - 1)
    session = ort.InferenceSession(
        model_path, sess_options=options, providers=["CPUExecutionProvider"]
    )
    input_name = session.get_inputs()[0].name
    output_names = [o.name for o in session.get_outputs()]

    async def infer(request: pb.ModelInferRequest, context: object) -> pb.ModelInferResponse:
        tensor = request.inputs[0]
        array = np.frombuffer(request.raw_input_contents[0], "<f4").reshape(tensor.shape)
        results = session.run(output_names, {input_name: array})
        response = pb.ModelInferResponse(model_name=request.model_name)
        for name, result in zip(output_names, results, strict=True):
            response.outputs.add(name=name, datatype="FP32", shape=result.shape)
            response.raw_output_contents.append(result.astype("<f4").tobytes())
        return response

    async def live(request: pb.ServerLiveRequest, context: object) -> pb.ServerLiveResponse:
        return pb.ServerLiveResponse(live=True)

    handler = grpc.method_handlers_generic_handler(
        "inference.GRPCInferenceService",
        {
            "ModelInfer": grpc.unary_unary_rpc_method_handler(
                infer,
                request_deserializer=pb.ModelInferRequest.FromString,
                response_serializer=pb.ModelInferResponse.SerializeToString,
            ),
            "ServerLive": grpc.unary_unary_rpc_method_handler(
                live,
                request_deserializer=pb.ServerLiveRequest.FromString,
                response_serializer=pb.ServerLiveResponse.SerializeToString,
            ),
        },
    )
    server = grpc.aio.server()
    server.add_generic_rpc_handlers((handler,))
    server.add_insecure_port(f"127.0.0.1:{port}")
    await server.start()
    await server.wait_for_termination()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--model", required=True)
    args = parser.parse_args()
    uvloop.run(serve(args.port, args.model))


if __name__ == "__main__":
    main()
