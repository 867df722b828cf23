#!/usr/bin/env bash
# Set up everything node-agent needs on a fresh Debian machine (Python 3.11+):
# Debian packages, a virtualenv in .venv with the agent, its embedded
# Placement (the extra node-agent[embedded], which the quick start runs) and
# its test dependencies, .client-venv with Nova and Neutron for the tests
# that drive them (tools/client-venv.sh), and .keystone-venv with the
# Keystone the tests sign in to (tools/keystone-venv.sh).  Safe to run
# again.
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
# libvirt-daemon, libvirt-daemon-driver-qemu, qemu-system-x86: the real
# libvirtd and QEMU guests of tests/fixtures/libvirtd.py.
DEBS="libvirt-dev pkg-config gcc python3-dev python3-venv rabbitmq-server systemd postgresql"
DEBS="$DEBS libvirt-daemon libvirt-daemon-driver-qemu qemu-system-x86"
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

# A privileged libvirtd's QEMU driver will not start without the user and
# group it runs guests as; libvirt-daemon-system's install scripts make
# them, and that package (with its systemd units) is not needed here.
if ! getent group libvirt-qemu >/dev/null; then
    $SUDO groupadd --system libvirt-qemu
fi
if ! getent passwd libvirt-qemu >/dev/null; then
    $SUDO useradd --system --gid libvirt-qemu --home-dir /var/lib/libvirt \
        --no-create-home --shell /usr/sbin/nologin \
        --comment "Libvirt Qemu" libvirt-qemu
fi

PYTHON=${PYTHON:-python3}
# The editable install follows the source by itself: pip runs again only
# when what it reads changed (the package metadata, the Python), which a
# stamp of their digest records, so a second quick start prints nothing
# of pip's.
STAMP=.venv/.inputs.sha256
digest=$({ cat setup.cfg setup.py; "$PYTHON" --version; } | sha256sum | cut -d' ' -f1)
if [ ! -x .venv/bin/python ]; then
    "$PYTHON" -m venv .venv
fi
if [ ! -f "$STAMP" ] || [ "$(cat "$STAMP")" != "$digest" ]; then
    .venv/bin/pip install -q --disable-pip-version-check -U pip setuptools wheel 2>&1 \
        | grep -v "^WARNING: Location" || true
    .venv/bin/pip install -q --disable-pip-version-check -e '.[test,embedded]' 2>&1 \
        | grep -v "^WARNING: Location" || true
    .venv/bin/python -c "import node_agent, libvirt, placement" \
        && echo "$digest" > "$STAMP"
fi
.venv/bin/python -c "import node_agent, libvirt, placement" \
    || { echo "setup failed: node_agent, libvirt or placement does not import" >&2; exit 1; }
# Nova's and Neutron's own code for tests/clients/ (cached: rebuilt only
# when its pinned requirements change).
bash tools/client-venv.sh
# Keystone for the tests that sign in as a deployment does (cached too).
bash tools/keystone-venv.sh
echo "setup done: .venv, .client-venv and .keystone-venv ready"
