#!/usr/bin/env bash
# Run the whole test suite (unit, functional against real Placement, and
# integration tests with real processes on 127.0.0.1).  Extra arguments go
# to pytest, e.g. tools/run-tests.sh tests/unit -k tree
#
# --dist loadgroup: the tests of one slow per-worker fixture (Keystone,
# libvirtd, the scheduler-cost run: tests/fixtures/scheduling.py) share
# one worker, so each is started once; pytest-xdist sends those groups
# first, largest first, then every other test one by one to whichever
# worker is free, so the workers finish together.
set -euo pipefail
cd "$(dirname "$0")/.."
exec .venv/bin/python -m pytest -n "${PYTEST_WORKERS:-2}" --dist loadgroup \
    -q --durations=30 "${@:-tests}"
