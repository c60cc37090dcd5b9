#!/usr/bin/env bash
# Install what is needed, then start the platform with demo models published and called.
# It serves on http://127.0.0.1:8080 (the web console at /console) and prints the keys to
# sign in and call with; --verbose shows the server's log.
set -euo pipefail
cd "$(dirname "$0")/.."
# Cache bytecode (see test.sh): the demo's processes would otherwise compile all they import.
unset PYTHONDONTWRITEBYTECODE
./scripts/bootstrap.sh
exec .venv/bin/modelport demo "$@"
