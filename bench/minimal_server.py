"""The reference for the serving benchmark: the same HTTP stack with no platform.

uvicorn (uvloop, httptools, no access log) + Starlette + onnxruntime, one route that
answers the same single-row Open Inference Protocol JSON request: orjson in, one
``session.run`` per request straight on the event loop (the fastest naive server:
no thread hop, no auth, no registry, no queue, no batching), orjson out.

    .venv/bin/python bench/minimal_server.py --port 8001 --model mlp.onnx [--workers 2] [--hop]

With ``--hop``, ``session.run`` moves off the event loop to one worker thread, the
hand-off the platform's rule (no model code on the loop) costs: a queue to the
thread and ``call_soon_threadsafe`` back, as the platform's executor does. Nothing
else changes, so the gap between the two servers is the price of that rule alone.

With ``--workers N``, N uvicorn worker processes share the socket, each with its own
session: the reference for a platform served by N workers.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import queue
import threading
from collections.abc import Callable

import numpy as np
import onnxruntime as ort
import orjson
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

Run = Callable[[np.ndarray], list[np.ndarray]]


def worker_thread(run: Run) -> Callable[[np.ndarray], asyncio.Future[list[np.ndarray]]]:
    """``run`` on one daemon thread: returns a function that queues an array and gives
    a future the thread resolves through ``call_soon_threadsafe``."""
    jobs: queue.SimpleQueue[tuple[np.ndarray, asyncio.Future[list[np.ndarray]]]] = (
        queue.SimpleQueue()
    )

    def work() -> None:
        while True:
            array, future = jobs.get()
            try:
                results = run(array)
            except Exception as exc:
                future.get_loop().call_soon_threadsafe(future.set_exception, exc)
            else:
                future.get_loop().call_soon_threadsafe(future.set_result, results)

    threading.Thread(target=work, name="minimal-hop", daemon=True).start()

    def submit(array: np.ndarray) -> asyncio.Future[list[np.ndarray]]:
        future = asyncio.get_running_loop().create_future()
        jobs.put((array, future))
        return future

    return submit


def build_app(model_path: str, *, hop: bool = False) -> Starlette:
    session = ort.InferenceSession(model_path, providers=["CPUExecutionProvider"])
    input_name = session.get_inputs()[0].name
    output_names = [o.name for o in session.get_outputs()]

    def run(array: np.ndarray) -> list[np.ndarray]:
        return session.run(output_names, {input_name: array})

    submit = worker_thread(run) if hop else None

    async def infer(request: Request) -> Response:
        doc = orjson.loads(await request.body())
        tensor = doc["inputs"][0]
        array = np.asarray(tensor["data"], dtype=np.float32).reshape(tensor["shape"])
        results = await submit(array) if submit else run(array)
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
    return build_app(os.environ["MINIMAL_SERVER_MODEL"], hop=bool(os.environ.get("MINIMAL_HOP")))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--model", required=True)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--hop", action="store_true", help="run the model on a worker thread")
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
        uvicorn.run(build_app(args.model, hop=args.hop), **options)
        return
    os.environ["MINIMAL_SERVER_MODEL"] = args.model
    if args.hop:
        os.environ["MINIMAL_HOP"] = "1"
    uvicorn.run(
        "minimal_server:app_from_environment", factory=True, workers=args.workers, **options
    )


if __name__ == "__main__":
    main()
