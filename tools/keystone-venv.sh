#!/usr/bin/env bash
# Build .keystone-venv: a real Keystone (the OpenStack identity service) for
# the tests that sign node-agent in as a deployment does
# (tests/fixtures/keystone.py).
#
# Keystone runs in its own virtualenv and its own process, served by a
# plain WSGI server (cheroot) on 127.0.0.1, so its dependencies never meet
# the agent's.  keystonemiddleware (for the Placement server that checks
# tokens) is in the agent's test extras, not here.
#
# Cached: the virtualenv is rebuilt only when this script or the Keystone
# version changes (a stamp file records their digest).  Safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."

VENV=.keystone-venv
KEYSTONE=${KEYSTONE:-keystone==30.*}
PYTHON=${PYTHON:-python3}
STAMP="$VENV/.inputs.sha256"

inputs_digest() {
    { cat "$0"; echo "$KEYSTONE"; "$PYTHON" --version; } \
        | sha256sum | cut -d' ' -f1
}

digest=$(inputs_digest)
if [ -x "$VENV/bin/python" ] && [ -f "$STAMP" ] \
        && [ "$(cat "$STAMP")" = "$digest" ]; then
    echo "keystone venv up to date: $VENV"
    exit 0
fi

rm -rf "$VENV"
"$PYTHON" -m venv "$VENV"
pip() {
    "$VENV/bin/pip" -q --disable-pip-version-check "$@" 2>&1 \
        | grep -v "^WARNING: Location" || true
}
pip install -U pip setuptools wheel
pip install "$KEYSTONE" cheroot
"$VENV/bin/python" -c "
import keystone.server.wsgi, cheroot.wsgi
" || { echo "keystone venv failed: keystone does not import;" \
            "see the pip output above" >&2; exit 1; }
[ -x "$VENV/bin/keystone-manage" ] \
    || { echo "keystone venv failed: no keystone-manage" >&2; exit 1; }
echo "$digest" > "$STAMP"
echo "keystone venv ready: $VENV"
