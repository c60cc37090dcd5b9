#!/usr/bin/env bash
# Install what is needed, then lint, type-check and run the test suite.
#   ./scripts/test.sh            everything (what CI runs)
#   ./scripts/test.sh --fast     the fast tier: skips the tests marked slow (real processes)
# Further arguments go to pytest. PostgreSQL tests run when MODELPORT_TEST_DATABASE_URL is
# set (CI sets it).
set -euo pipefail
cd "$(dirname "$0")/.."
tier=()
if [ "${1:-}" = "--fast" ]; then
  shift
  tier=(-m "not slow")
fi
./scripts/bootstrap.sh
.venv/bin/ruff check src tests bench
.venv/bin/ruff format --check src tests bench
.venv/bin/mypy
exec .venv/bin/python -m pytest ${tier[@]+"${tier[@]}"} "$@"
