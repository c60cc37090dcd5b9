"""Example calls of one model, filled in with its name, inputs and the console's own
address: ``curl`` and ``tritonclient`` against ``/v2``, the ``openai`` SDK against
``/v1``. The key is left as an environment variable: a page never prints a secret."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

NUMPY_TYPES = {
    "FP16": "np.float16",
    "FP32": "np.float32",
    "FP64": "np.float64",
    "INT8": "np.int8",
    "INT16": "np.int16",
    "INT32": "np.int32",
    "INT64": "np.int64",
    "UINT8": "np.uint8",
    "UINT16": "np.uint16",
    "UINT32": "np.uint32",
    "UINT64": "np.uint64",
    "BOOL": "np.bool_",
    "BYTES": "np.object_",
}


@dataclass(frozen=True)
class Snippets:
    curl: str
    tritonclient: str
    openai: str


def _example_inputs(inputs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One concrete request tensor per input: its shape with each variable dimension 1,
    filled with zeros (or empty strings)."""
    tensors = []
    for spec in inputs:
        shape = [d if isinstance(d, int) and d > 0 else 1 for d in spec.get("shape", [])]
        count = 1
        for d in shape:
            count *= d
        zero: Any = "" if spec.get("datatype") == "BYTES" else 0
        tensors.append(
            {
                "name": spec["name"],
                "datatype": spec["datatype"],
                "shape": shape,
                "data": [zero] * count,
            }
        )
    return tensors


def snippets(
    base_url: str,
    model: str,
    inputs: list[dict[str, Any]],
    example: dict[str, Any] | None,
    *,
    generative: bool = False,
) -> Snippets:
    """``example``: the manifest's first example request, when it has one. A generative
    model's curl example calls ``/v1/chat/completions``."""
    tensors = example["inputs"] if example else _example_inputs(inputs)
    body = json.dumps({"inputs": tensors})
    path = f"/v2/models/{model}/infer"
    if generative:
        path = "/v1/chat/completions"
        body = json.dumps({"model": model, "messages": [{"role": "user", "content": "Hello"}]})
    curl = (
        f"curl -X POST {base_url}{path} \\\n"
        '  -H "Authorization: Bearer $MODELPORT_API_KEY" \\\n'
        '  -H "Content-Type: application/json" \\\n'
        f"  -d '{body.replace(chr(39), chr(39) + chr(92) + chr(39) + chr(39))}'"
    )
    host = base_url.split("://", 1)[-1]
    lines = [
        "import os",
        "",
        "import numpy as np",
        "import tritonclient.http as httpclient",
        "",
        f'client = httpclient.InferenceServerClient(url="{host}")',
        'auth = {"Authorization": f"Bearer {os.environ[\'MODELPORT_API_KEY\']}"}',
        "inputs = []",
    ]
    for tensor in tensors:
        dtype = NUMPY_TYPES.get(tensor["datatype"], "np.float32")
        lines += [
            f'tensor = httpclient.InferInput("{tensor["name"]}", {tensor["shape"]}, '
            f'"{tensor["datatype"]}")',
            f"tensor.set_data_from_numpy(np.array({tensor['data']!r}, dtype={dtype})"
            f".reshape({tensor['shape']}))",
            "inputs.append(tensor)",
        ]
    lines += [
        f'result = client.infer("{model}", inputs, headers=auth)',
        "print(result.get_response())",
    ]
    openai = "\n".join(
        [
            "import os",
            "",
            "from openai import OpenAI",
            "",
            f'client = OpenAI(base_url="{base_url}/v1", api_key=os.environ["MODELPORT_API_KEY"])',
            "reply = client.chat.completions.create(",
            f'    model="{model}",',
            '    messages=[{"role": "user", "content": "Hello"}],',
            ")",
            "print(reply.choices[0].message.content)",
        ]
    )
    return Snippets(curl=curl, tritonclient="\n".join(lines), openai=openai)
