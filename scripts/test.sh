#!/usr/bin/env bash
# Install what is needed, then lint, type-check and run the test suite across processes.
#   ./scripts/test.sh              everything (what CI runs), on pytest-xdist workers
#   ./scripts/test.sh --fast       the fast tier: skips the tests marked slow (real processes)
#   ./scripts/test.sh --shuffle    the tests in a random order (pytest-randomly; the seed is
#                                  printed, --shuffle --randomly-seed=N repeats it)
# Further arguments go to pytest (-n 0 runs in one process). PostgreSQL and Redis tests run
# when MODELPORT_TEST_DATABASE_URL and MODELPORT_TEST_REDIS_URL are set (CI sets them).
# At the end: the wall-clock time of each phase and the count of tests.
set -uo pipefail
cd "$(dirname "$0")/.."
# Cache bytecode, whatever the environment says: with PYTHONDONTWRITEBYTECODE set, every
# worker and every process a test starts (servers, sandboxes, model hosts) compiled each
# module it imported again, from torch's to the project's, and pytest rewrote every test
# module in every worker.
unset PYTHONDONTWRITEBYTECODE
tier=()
order=()
while [ $# -gt 0 ]; do
  case "$1" in
    --fast) tier=(-m "not slow"); shift ;;
    --shuffle) order=(-p randomly); shift ;;
    *) break ;;
  esac
done

phases=()
if [ -n "${MODELPORT_TEST_SETUP_SECONDS:-}" ]; then  # .ci/run's services and system packages
  phases+=("$(printf '%-11s %5d s  %s' setup "$MODELPORT_TEST_SETUP_SECONDS" ok)")
fi
run_phase() {  # run_phase NAME COMMAND...: time it; stop the script when it fails
  local name=$1 start=$SECONDS
  shift
  "$@"
  local rc=$?
  phases+=("$(printf '%-11s %5d s  %s' "$name" $((SECONDS - start)) "$([ $rc -eq 0 ] && echo ok || echo "failed ($rc)")")")
  return $rc
}
report=$(mktemp -d)
summary() {
  echo
  echo "---- phases (wall clock)"
  printf '%s\n' "${phases[@]}"
  [ -f "$report/junit.xml" ] && .venv/bin/python scripts/test_counts.py "$report/junit.xml"
  rm -rf "$report"
}
trap summary EXIT

run_phase install ./scripts/bootstrap.sh || exit $?
run_phase lint sh -c '.venv/bin/ruff check src tests bench scripts && .venv/bin/ruff format --check src tests bench scripts' || exit $?
run_phase types .venv/bin/mypy || exit $?
run_phase tests .venv/bin/python -m pytest -n "${MODELPORT_TEST_WORKERS:-auto}" --dist loadscope --no-loadscope-reorder \
  --durations=50 --junitxml="$report/junit.xml" ${order[@]+"${order[@]}"} \
  ${tier[@]+"${tier[@]}"} "$@"
