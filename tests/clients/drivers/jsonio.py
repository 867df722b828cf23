"""The driver scripts' protocol: one JSON request on stdin, one JSON
answer on stdout (the clients' own logs go to stderr)."""

import json
import sys


def read_request():
    return json.load(sys.stdin)


def answer(result):
    json.dump(result, sys.stdout, sort_keys=True)
    sys.stdout.write('\n')
