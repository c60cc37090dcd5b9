#!/usr/bin/env bash
# Install what is needed, then start the platform with a demo model published.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/bootstrap.sh
exec .venv/bin/modelport demo "$@"
