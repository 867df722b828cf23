#!/usr/bin/env bash
# Set up everything node-agent needs on a fresh Debian machine (Python 3.11+):
# Debian packages, a virtualenv in .venv with the agent, its embedded
# Placement (the extra node-agent[embedded], which the quick start runs) and
# its test dependencies, and .client-venv with Nova and Neutron for the
# tests that drive them (tools/client-venv.sh).  Safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."

SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi

# libvirt-dev + pkg-config (+ gcc and the Python headers): libvirt-python
# compiles against them, and the libvirt library carries the test driver
# (test:///...).
# rabbitmq-server: real broker for the RPC integration tests.
# systemd: systemd-analyze verify for the unit file test.
# postgresql: Placement over a production database in the concurrency
# tests and the fleet benchmark (tests/fixtures/postgres.py).
DEBS="libvirt-dev pkg-config gcc python3-dev python3-venv rabbitmq-server systemd postgresql"
missing=""
for p in $DEBS; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" \
        || missing="$missing $p"
done
if [ -n "$missing" ]; then
    echo "installing Debian packages:$missing"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq \
        --no-install-recommends $missing >/dev/null
fi

PYTHON=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
    "$PYTHON" -m venv .venv
fi
.venv/bin/pip install -q --disable-pip-version-check -U pip setuptools wheel 2>&1 \
    | grep -v "^WARNING: Location" || true
.venv/bin/pip install -q --disable-pip-version-check -e '.[test,embedded]' 2>&1 \
    | grep -v "^WARNING: Location" || true
.venv/bin/python -c "import node_agent, libvirt, placement" \
    || { echo "setup failed: node_agent, libvirt or placement does not import" >&2; exit 1; }
# Nova's and Neutron's own code for tests/clients/ (cached: rebuilt only
# when its pinned requirements change).
bash tools/client-venv.sh
echo "setup done: .venv and .client-venv ready"
