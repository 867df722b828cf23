#!/usr/bin/env bash
# Run the whole test suite (unit, functional against real Placement, and
# integration tests with real processes on 127.0.0.1).  Extra arguments go
# to pytest, e.g. tools/run-tests.sh tests/unit -k tree
set -euo pipefail
cd "$(dirname "$0")/.."
exec .venv/bin/python -m pytest -n "${PYTEST_WORKERS:-2}" -q --durations=30 "${@:-tests}"
