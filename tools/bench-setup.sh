#!/usr/bin/env bash
# Create the benchmark's own virtualenv, .bench-venv, with Nova's report
# client beside node-agent, both against the same openstack-placement.
#
# Nova is only ever installed here: it is a point of comparison for
# bench/report_client, never a dependency of node-agent.  Safe to run again.
# Needs the Debian packages tools/setup.sh installs (libvirt-dev, pkg-config:
# nova pulls libvirt-python, which compiles against them).
set -euo pipefail
cd "$(dirname "$0")/.."

NOVA_VERSION=${NOVA_VERSION:-34.0.0}
PLACEMENT_VERSION=${PLACEMENT_VERSION:-16.0.0}
PYTHON=${PYTHON:-python3}

if [ ! -x .bench-venv/bin/python ]; then
    "$PYTHON" -m venv .bench-venv
fi
.bench-venv/bin/pip install -q --disable-pip-version-check -U pip setuptools wheel 2>&1 \
    | grep -v "^WARNING: Location" || true
.bench-venv/bin/pip install -q --disable-pip-version-check \
    "nova==${NOVA_VERSION}" "openstack-placement==${PLACEMENT_VERSION}" \
    -e '.[test]' 2>&1 | grep -v "^WARNING: Location" || true
.bench-venv/bin/python -c \
    "import nova.scheduler.client.report, placement.deploy, cheroot.wsgi, node_agent" \
    || { echo "bench setup failed: nova, placement or node_agent does not import" >&2; exit 1; }
echo "bench setup done: .bench-venv ready"
