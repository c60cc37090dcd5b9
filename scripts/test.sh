#!/usr/bin/env bash
# Install what is needed, then lint and run the whole test suite.
# PostgreSQL tests run when MODELPORT_TEST_DATABASE_URL is set (CI sets it).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/bootstrap.sh
.venv/bin/ruff check src tests bench
.venv/bin/ruff format --check src tests bench
exec .venv/bin/python -m pytest "$@"
