#!/usr/bin/env bash
# Refresh the lock files from pyproject.toml's ranges and requirements/pins.in, to today's
# releases (pip-tools' pip-compile, hashes for every file). Then run ./scripts/test.sh and
# commit requirements/ with pyproject.toml. See docs/testing.md, "Dependencies".
#   ./scripts/lock.sh                 refresh everything to the newest allowed releases
#   ./scripts/lock.sh -P openai       move one package only (pip-compile's --upgrade-package)
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
tools=.venv-lock
if [ ! -x "$tools/bin/pip-compile" ]; then
  "$PYTHON" -m venv "$tools"
  "$tools/bin/python" -m pip install --quiet --upgrade pip "pip-tools>=7.4"
fi
upgrade=(--upgrade)
if [ "${1:-}" = "-P" ]; then
  upgrade=(--upgrade-package "$2")
fi
"$tools/bin/pip-compile" --quiet "${upgrade[@]}" --generate-hashes --allow-unsafe --strip-extras \
  --all-extras --no-header --no-emit-index-url --no-emit-find-links --output-file requirements/lock.txt pyproject.toml requirements/pins.in
"$tools/bin/python" scripts/lock_models.py requirements/models.txt
echo "requirements/lock.txt and requirements/models.txt refreshed: run ./scripts/test.sh, then commit them"
