#!/usr/bin/env bash
# Run the whole test suite (unit, functional against real Placement, and
# integration tests with real processes on 127.0.0.1: a Placement server,
# PostgreSQL, RabbitMQ, Keystone, libvirtd with QEMU, Nova's and Neutron's
# own code).  Extra arguments go to pytest, e.g.
#   tools/run-tests.sh tests/unit -k tree
# --quick: the unit and functional tests that start no service of their
# own (in-process Placement over SQLite, recorded hosts), about a quarter
# of the whole suite's time.
#
# --dist loadgroup: the tests of one slow per-worker fixture (Keystone,
# libvirtd, the scheduler-cost run: tests/fixtures/scheduling.py) share
# one worker, so each is started once; pytest-xdist sends those groups
# first, largest first, then every other test one by one to whichever
# worker is free, so the workers finish together.
#
# Three workers on two cores: a fifth to a third of the CPU stays idle
# with two, while tests wait on the processes they started (a broker's
# boot, an audit interval, a reconnect).  PYTEST_WORKERS=N overrides it.
set -euo pipefail
cd "$(dirname "$0")/.."
args=("$@")
if [ "${1:-}" = "--quick" ]; then
    args=(tests/unit tests/functional -m "not services" "${@:2}")
fi
start=$SECONDS
status=0
.venv/bin/python -m pytest -n "${PYTEST_WORKERS:-3}" --dist loadgroup \
    -q --durations=30 "${args[@]:-tests}" || status=$?
echo "tools/run-tests.sh: $((SECONDS - start)) s on $(nproc) cores" \
    "(README.md gives the whole suite's time and --quick's)"
exit $status
