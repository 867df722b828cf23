#!/usr/bin/env bash
# Regenerate etc/node-agent/node-agent.conf.sample from the option modules:
# the agent's (namespace node_agent) and those of every driver installed
# (namespace node_agent.drivers, each driver class's list_opts(): an
# out-of-tree driver's options included).  Extra arguments go to
# oslo-config-generator (--output-file FILE writes elsewhere).
set -euo pipefail
cd "$(dirname "$0")/.."
.venv/bin/python -m oslo_config.generator \
    --config-file etc/node-agent/oslo-config-generator.conf "$@"
