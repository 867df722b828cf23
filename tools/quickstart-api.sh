#!/usr/bin/env bash
# The quick start's accelerator API: node-agent-api on the embedded
# defaults of CONF (noauth, its SQLite database under state_path), an
# example device profile created through it (once) and the profiles
# listed, then the API stopped.  tools/quickstart.sh runs it after the
# agent; tests/integration/test_quickstart.py too.
#
#   tools/quickstart-api.sh CONF [PORT]      (PORT: 6666)
set -euo pipefail
cd "$(dirname "$0")/.."
CONF=$1
PORT=${2:-6666}
BIN=.venv/bin
URL=http://127.0.0.1:$PORT

EXTRA=$(mktemp)
LOG=$(mktemp)
API_PID=
stop() {
    if [ -n "$API_PID" ]; then
        kill -TERM "$API_PID" 2>/dev/null || true
        wait "$API_PID" 2>/dev/null || true
        echo "node-agent-api stopped"
    fi
    rm -f "$EXTRA" "$LOG"
}
trap stop EXIT
printf '[api]\nbind_host = 127.0.0.1\nbind_port = %s\n' "$PORT" > "$EXTRA"
ARGS=(--config-file "$CONF" --config-file "$EXTRA")

"$BIN/node-agent-manage" "${ARGS[@]}" api_db sync
"$BIN/node-agent-api" "${ARGS[@]}" > "$LOG" 2>&1 &
API_PID=$!
echo "node-agent-api serving $URL (noauth, SQLite under state_path)"

"$BIN/python" - "$URL" "$API_PID" "$LOG" <<'PYTHON'
import json
import os
import sys
import time
import urllib.error
import urllib.request

url, pid, log = sys.argv[1], int(sys.argv[2]), sys.argv[3]
PROFILE = {'name': 'example-gpu',
           'description': 'one whole GPU the agent reports (PGPU)',
           'groups': [{'resources:PGPU': '1'}]}


def call(method, path, body=None):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url + path, data=data, method=method,
                                 headers={'Content-Type': 'application/json'})
    with urllib.request.urlopen(req, timeout=30) as resp:
        return resp.status, json.loads(resp.read() or b'null')


deadline = time.monotonic() + 60
while True:
    try:
        call('GET', '/')
        break
    except (urllib.error.URLError, OSError):
        alive = os.path.exists(f'/proc/{pid}')
        if not alive or time.monotonic() > deadline:
            sys.exit('node-agent-api did not start:\n' + open(log).read())
        time.sleep(0.2)

found = call('GET', '/v2/device_profiles?name=' + PROFILE['name'])[1]
if found['device_profiles']:
    print(f'device profile {PROFILE["name"]} exists already')
else:
    status, made = call('POST', '/v2/device_profiles', [PROFILE])
    print(f'created device profile {made["name"]} ({made["uuid"]}): {status}')
print('GET /v2/device_profiles:')
for profile in call('GET', '/v2/device_profiles')[1]['device_profiles']:
    print(f'  {profile["name"]}  {profile["uuid"]}  '
          f'{json.dumps(profile["groups"])}')
PYTHON
