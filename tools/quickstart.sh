#!/usr/bin/env bash
# The quick start: install everything (tools/setup.sh), run the agent once
# on the embedded defaults (etc/node-agent/quickstart.conf: deployment =
# standalone, as there is no nova-compute here to own the root; embedded
# Placement over SQLite in ./.state, this machine's /sys, NVML if present),
# then print the provider tree it built.  libvirt is the libvirtd of this
# machine (qemu:///system) when one answers, else libvirt's test driver,
# with this machine's CPU (architecture, model and vendor); the script and
# the agent's log say which.
set -euo pipefail
cd "$(dirname "$0")/.."

bash tools/setup.sh

CONF=etc/node-agent/quickstart.conf
mkdir -p .state
ARGS=(--config-file "$CONF")
LIBVIRTD=qemu:///system
if timeout 10 .venv/bin/python -c "
import sys, libvirt
libvirt.registerErrorHandler(lambda ctx, err: None, None)
libvirt.openReadOnly(sys.argv[1]).close()" "$LIBVIRTD" 2>/dev/null; then
    echo "libvirt: the libvirtd of this machine ($LIBVIRTD)"
    printf '[libvirt]\nconnection_uri = %s\n' "$LIBVIRTD" \
        > .state/quickstart-libvirtd.conf
    ARGS+=(--config-file .state/quickstart-libvirtd.conf)
else
    echo "libvirt: no libvirtd answers at $LIBVIRTD; using libvirt's test" \
        "driver (test:///default) with this machine's CPU architecture" \
        "and model"
fi
echo "running the agent once (embedded Placement in ./.state)"
.venv/bin/node-agent "${ARGS[@]}" --once
echo
.venv/bin/node-agent-manage "${ARGS[@]}" tree show
echo
echo "the accelerator API (node-agent-api) on the same configuration"
bash tools/quickstart-api.sh "$CONF"
