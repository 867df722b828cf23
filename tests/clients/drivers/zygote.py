"""One start of Nova's (or Neutron's) code, a fork of it for each call.

Importing Nova takes seconds; a test suite that calls a driver script a
hundred times would spend most of its time there.  This process imports
what one driver script needs (the modules named on its command line),
then runs the script once per call in a forked child, exactly as
``python <script>`` would run it: ``__main__``, the request on stdin, the
answer on stdout, logs on stderr, and a fresh copy of every module's
global state (Nova's ``CONF`` included), since nothing runs in this
process but the imports::

    python zygote.py drivers/nova_compute.py nova.compute.resource_tracker

Protocol, one JSON line each way on this process's own stdin and stdout:
``{"stdin": path, "stdout": path, "stderr": path, "timeout": seconds}``
in, ``{"rc": exit status}`` out (-9 when the call ran past its timeout and
was killed).  The process ends when its stdin closes.
"""

import importlib
import json
import os
import runpy
import signal
import sys
import time
import traceback


def _child(script, call):
    """Run ``script`` as ``__main__`` with the call's files as its
    standard streams; never returns."""
    code = 1
    try:
        for fd, path, flags in (
                (0, call['stdin'], os.O_RDONLY),
                (1, call['stdout'], os.O_WRONLY | os.O_CREAT | os.O_TRUNC),
                (2, call['stderr'], os.O_WRONLY | os.O_CREAT | os.O_TRUNC)):
            opened = os.open(path, flags, 0o600)
            os.dup2(opened, fd)
            os.close(opened)
        sys.stdin = open(0, closefd=False)
        sys.stdout = open(1, 'w', closefd=False)
        sys.stderr = open(2, 'w', closefd=False)
        sys.argv = [script]
        try:
            runpy.run_path(script, run_name='__main__')
            code = 0
        except SystemExit as exit_:
            code = exit_.code if isinstance(exit_.code, int) else (
                0 if exit_.code is None else 1)
        except BaseException:
            traceback.print_exc()
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:
                pass
        os._exit(code)


def _wait(pid, timeout):
    deadline = time.monotonic() + timeout
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            return -signal.SIGKILL
        time.sleep(0.02)


def main():
    script = os.path.abspath(sys.argv[1])
    sys.path.insert(0, os.path.dirname(script))
    for name in sys.argv[2:]:
        importlib.import_module(name)
    replies = os.fdopen(os.dup(1), 'w')
    requests = os.fdopen(os.dup(0), 'r')
    # What the imports may have printed stays out of the replies.
    sys.stdout.flush()
    os.dup2(2, 1)
    while True:
        line = requests.readline()
        if not line:
            return
        call = json.loads(line)
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            requests.close()
            replies.close()
            _child(script, call)
        replies.write(json.dumps({'rc': _wait(pid, call['timeout'])}) + '\n')
        replies.flush()


if __name__ == '__main__':
    main()
