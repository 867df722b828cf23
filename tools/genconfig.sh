#!/usr/bin/env bash
# Regenerate etc/node-agent/node-agent.conf.sample from the option modules.
set -euo pipefail
cd "$(dirname "$0")/.."
.venv/bin/python -m oslo_config.generator \
    --config-file etc/node-agent/oslo-config-generator.conf
