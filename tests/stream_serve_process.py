"""A serving process for tests of streamed calls across processes.

The platform's application, built from the environment's ``MODELPORT_*`` settings as
``modelport serve`` builds it, whose engines are a toy generative engine (format
``TOY_FORMAT``, counting ``1 2 3 ...`` one token every 10 ms): a model of that format
streams through ``/v1/completions`` as a real one would.

Run: ``python -m tests.stream_serve_process PORT``.
"""

from __future__ import annotations

import sys

import uvicorn

from modelport.api import create_app
from modelport.app import build_services
from modelport.config import Settings
from modelport.testing.toy_engine import TOY_FORMAT, ToyEngine, ToyGenerativeFormat


def main(port: int) -> None:
    engine = ToyEngine(mode="count", delay=0.01)
    services = build_services(
        Settings(), generative_formats={TOY_FORMAT: ToyGenerativeFormat(engine)}
    )
    uvicorn.run(create_app(services), host="127.0.0.1", port=port, log_level="warning")


if __name__ == "__main__":
    main(int(sys.argv[1]))
