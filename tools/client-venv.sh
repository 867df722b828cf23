#!/usr/bin/env bash
# Build .client-venv: Nova's and Neutron's own code, the real clients of what
# node-agent writes, for the tests under tests/clients/.
#
# The tests run in node-agent's .venv and call small driver scripts with
# .client-venv/bin/python, so Nova's global config and eventlet never enter
# the agent's process.  Nova and neutron-lib come with their dependencies
# (tools/client-requirements.txt); neutron itself is installed --no-deps:
# only neutron.agent.common.placement_report and the QoS port request code
# are driven, and neutron's full dependency set (ovs, pyroute2, ...) is not
# needed for them.
#
# Cached: the virtualenv is rebuilt only when this script or the
# requirements change (a stamp file records their digest).  Safe to run
# again.  Needs the Debian packages tools/setup.sh installs (libvirt-dev,
# pkg-config: nova pulls libvirt-python, which compiles against them).
set -euo pipefail
cd "$(dirname "$0")/.."

VENV=.client-venv
REQUIREMENTS=tools/client-requirements.txt
NEUTRON=${NEUTRON:-neutron==29.*}
PYTHON=${PYTHON:-python3}
STAMP="$VENV/.inputs.sha256"

inputs_digest() {
    { cat "$0" "$REQUIREMENTS"; echo "$NEUTRON"; "$PYTHON" --version; } \
        | sha256sum | cut -d' ' -f1
}

digest=$(inputs_digest)
if [ -x "$VENV/bin/python" ] && [ -f "$STAMP" ] \
        && [ "$(cat "$STAMP")" = "$digest" ]; then
    echo "client venv up to date: $VENV"
    exit 0
fi

rm -rf "$VENV"
"$PYTHON" -m venv "$VENV"
pip() {
    "$VENV/bin/pip" -q --disable-pip-version-check "$@" 2>&1 \
        | grep -v "^WARNING: Location" || true
}
pip install -U pip setuptools wheel
pip install -r "$REQUIREMENTS"
pip install --no-deps "$NEUTRON"
"$VENV/bin/python" -c "
import nova.scheduler.client.report, nova.scheduler.utils, nova.virt.fake
import neutron_lib.placement.utils, neutron.agent.common.placement_report
" || { echo "client venv failed: nova or neutron does not import;" \
            "see the pip output above" >&2; exit 1; }
echo "$digest" > "$STAMP"
echo "client venv ready: $VENV"
