"""Backend fixtures: a second modelport process (``modelport serve`` on a loopback port,
its own home and admin key) with real ONNX models published through its API, and a
small OpenAI-compatible server."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from modelport.digests import sha256_digest
from modelport.manifest import Manifest
from modelport.serving.types import VersionRef
from tests.conftest import ensure_tenant, free_port
from tests.models import add_one, mlp

REMOTE_KEY = "remote-admin-key-" + "r" * 24


class ModelportProcess:
    """``modelport serve`` in a subprocess that a test may kill and start again."""

    def __init__(self, home: Path) -> None:
        self.home = home
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.key = REMOTE_KEY
        self.proc: subprocess.Popen[bytes] | None = None
        self.versions: dict[str, VersionRef] = {}

    def start(self) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("MODELPORT_")}
        env |= {
            "MODELPORT_HOME": str(self.home),
            "MODELPORT_ADMIN_KEY": self.key,
            "MODELPORT_RUNTIME_EXECUTION": "manifest",  # threads, as the suite's (tests/conftest.py)
            "MODELPORT_RUNTIME_INTRA_OP_THREADS": "1",
        }
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "modelport.cli", "serve", "--port", str(self.port),
             "--log-level", "warning"],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )  # fmt: skip
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"modelport serve exited with {self.proc.returncode}")
            try:
                if httpx.get(f"{self.url}/v2/health/ready", timeout=1).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.05)
        raise RuntimeError("modelport serve did not become ready")

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=30)
        self.proc = None

    # ---- publishing through the API, as a publisher would
    def api(self) -> httpx.Client:
        return httpx.Client(
            base_url=self.url, headers={"Authorization": f"Bearer {self.key}"}, timeout=60
        )

    def publish(self, ref: str, version: str, data: bytes, manifest: dict[str, Any]) -> VersionRef:
        owner, name = ref.split("/")
        with self.api() as api:
            digest = sha256_digest(data)
            uploaded = api.post("/api/uploads", params={"digest": digest}, content=data)
            assert uploaded.status_code == 201, uploaded.text
            ensure_tenant(api, owner)
            created = api.post("/api/models", json={"owner": owner, "name": name, "license": "MIT"})
            assert created.status_code in (201, 409), created.text
            manifest = {
                "format": "onnx",
                "files": [{"path": "model.onnx", "digest": digest, "size": len(data)}],
                "license": "MIT",
                **manifest,
            }
            published = api.post(
                f"/api/models/{ref}/versions", json={"version": version, "manifest": manifest}
            )
            assert published.status_code == 201, published.text
            body = published.json()
        found = VersionRef(
            ref, version, body["manifest_digest"], Manifest.model_validate(body["manifest"])
        )
        self.versions[f"{ref}:{version}"] = found
        return found


@pytest.fixture(scope="module")
def remote(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ModelportProcess]:
    """A running modelport with ``acme/adder:1`` (y = x + 1) and ``acme/mlp:1`` published."""
    server = ModelportProcess(tmp_path_factory.mktemp("remote-home"))
    server.start()
    try:
        server.publish(
            "acme/adder",
            "1",
            add_one().SerializeToString(),
            {
                "inputs": [{"name": "x", "datatype": "FP32", "shape": [-1, 4]}],
                "outputs": [{"name": "y", "datatype": "FP32", "shape": [-1, 4]}],
            },
        )
        server.publish(
            "acme/mlp",
            "1",
            mlp().SerializeToString(),
            {
                "inputs": [{"name": "features", "datatype": "FP32", "shape": [-1, 8]}],
                "outputs": [{"name": "probabilities", "datatype": "FP32", "shape": [-1, 3]}],
            },
        )
        yield server
    finally:
        server.kill()


# ---- an OpenAI-compatible server -----------------------------------------------


class OpenAIServer:
    """Deterministic answers: completions and chat reverse the text; an embedding is
    [length, vowels, spaces]. ``status`` forces an error status on every call."""

    def __init__(self) -> None:
        self.status = 200
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.app = Starlette(
            routes=[
                Route("/v1/models", self.models),
                Route("/v1/completions", self.completions, methods=["POST"]),
                Route("/v1/chat/completions", self.chat, methods=["POST"]),
                Route("/v1/embeddings", self.embeddings, methods=["POST"]),
            ]
        )
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        config = uvicorn.Config(self.app, host="127.0.0.1", port=self.port, log_level="warning")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def start(self) -> OpenAIServer:
        self.thread.start()
        deadline = time.monotonic() + 60
        while not self.server.started:
            assert time.monotonic() < deadline, "server did not start"
            time.sleep(0.01)
        return self

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)

    async def _body(self, request: Request) -> dict[str, Any] | JSONResponse:
        body = await request.json()
        self.calls.append((request.url.path, body))
        if self.status != 200:
            error = {"message": f"forced {self.status}", "type": "error", "code": None}
            return JSONResponse({"error": error}, self.status)
        if body.get("model") != "tiny-llm":
            error = {"message": f"model {body.get('model')} not found", "type": "invalid"}
            return JSONResponse({"error": error}, 404)
        return dict(body)

    async def models(self, request: Request) -> JSONResponse:
        return JSONResponse({"object": "list", "data": [{"id": "tiny-llm", "object": "model"}]})

    async def completions(self, request: Request) -> JSONResponse:
        body = await self._body(request)
        if isinstance(body, JSONResponse):
            return body
        prompts = body["prompt"] if isinstance(body["prompt"], list) else [body["prompt"]]
        limit = body.get("max_tokens", 16)
        choices = [
            {"index": i, "text": p[::-1][:limit], "finish_reason": "stop"}
            for i, p in enumerate(prompts)
        ]
        return JSONResponse({"object": "text_completion", "choices": list(reversed(choices))})

    async def chat(self, request: Request) -> JSONResponse:
        body = await self._body(request)
        if isinstance(body, JSONResponse):
            return body
        text = body["messages"][-1]["content"]
        message = {"role": "assistant", "content": text[::-1]}
        return JSONResponse({"choices": [{"index": 0, "message": message}]})

    async def embeddings(self, request: Request) -> JSONResponse:
        body = await self._body(request)
        if isinstance(body, JSONResponse):
            return body
        data = [
            {
                "index": i,
                "object": "embedding",
                "embedding": [len(t), sum(c in "aeiou" for c in t), t.count(" ")],
            }
            for i, t in enumerate(body["input"])
        ]
        return JSONResponse({"object": "list", "data": data})


@pytest.fixture
def openai_server() -> Iterator[OpenAIServer]:
    server = OpenAIServer().start()
    yield server
    server.stop()
