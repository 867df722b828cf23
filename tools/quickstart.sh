#!/usr/bin/env bash
# The quick start: install everything (tools/setup.sh), run the agent once
# on the embedded defaults (etc/node-agent/quickstart.conf: deployment =
# standalone, as there is no nova-compute here to own the root; embedded
# Placement over SQLite in ./.state, this machine's /sys, libvirt's test
# driver, NVML if present), then print the provider tree it built.
set -euo pipefail
cd "$(dirname "$0")/.."

bash tools/setup.sh

CONF=etc/node-agent/quickstart.conf
mkdir -p .state
echo "running the agent once (embedded Placement in ./.state)"
.venv/bin/node-agent --config-file "$CONF" --once
echo
.venv/bin/node-agent-manage --config-file "$CONF" tree show
