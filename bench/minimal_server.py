"""The reference for the serving benchmark: the same HTTP stack with no platform.

uvicorn (uvloop, httptools, no access log) + Starlette + onnxruntime, one route that
answers the same single-row Open Inference Protocol JSON request: orjson in, one
``session.run`` per request straight on the event loop (the fastest naive server:
no thread hop, no auth, no registry, no queue, no batching), orjson out.

    .venv/bin/python bench/minimal_server.py --port 8001 --model mlp.onnx [--workers 2]

With ``--workers N``, N uvicorn worker processes share the socket, each with its own
session: the reference for a platform served by N workers.
"""

from __future__ import annotations

import argparse
import os

import numpy as np
import onnxruntime as ort
import orjson
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route


def build_app(model_path: str) -> Starlette:
    session = ort.InferenceSession(model_path, providers=["CPUExecutionProvider"])
    input_name = session.get_inputs()[0].name
    output_names = [o.name for o in session.get_outputs()]

    async def infer(request: Request) -> Response:
        doc = orjson.loads(await request.body())
        tensor = doc["inputs"][0]
        array = np.asarray(tensor["data"], dtype=np.float32).reshape(tensor["shape"])
        results = session.run(output_names, {input_name: array})
        outputs = [
            {"name": name, "datatype": "FP32", "shape": list(r.shape), "data": r.ravel()}
            for name, r in zip(output_names, results, strict=True)
        ]
        body = orjson.dumps(
            {"model_name": "mlp", "outputs": outputs}, option=orjson.OPT_SERIALIZE_NUMPY
        )
        return Response(body, media_type="application/json")

    async def ready(request: Request) -> Response:
        return Response(b'{"ready":true}', media_type="application/json")

    return Starlette(
        routes=[
            Route("/v2/models/{name}/infer", infer, methods=["POST"]),
            Route("/v2/health/ready", ready, methods=["GET"]),
        ]
    )


def app_from_environment() -> Starlette:
    """uvicorn's factory in each worker process: the model from ``MINIMAL_SERVER_MODEL``."""
    return build_app(os.environ["MINIMAL_SERVER_MODEL"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--model", required=True)
    parser.add_argument("--workers", type=int, default=1)
    args = parser.parse_args()
    options = {
        "host": "127.0.0.1",
        "port": args.port,
        "loop": "uvloop",
        "http": "httptools",
        "access_log": False,
        "log_level": "warning",
    }
    if args.workers == 1:
        uvicorn.run(build_app(args.model), **options)
        return
    os.environ["MINIMAL_SERVER_MODEL"] = args.model
    uvicorn.run(
        "minimal_server:app_from_environment", factory=True, workers=args.workers, **options
    )


if __name__ == "__main__":
    main()
