"""What is wrong with the daemon now, and since when.

``{what: (since, detail)}``: shown in the status line (the notifier's
notes, ``...; <what> <detail> since <time>``) and in the metrics
(``node_agent_problem_since_seconds``).  The time is that of the first
report since the last time it was fine.
"""

import time


class Problems:
    """The daemon's problems, told to ``notifier`` and ``metrics``."""

    def __init__(self, notifier, metrics):
        self._notifier = notifier
        self._metrics = metrics
        self._problems = {}

    def problem(self, what, detail):
        """Record that ``what`` is wrong (``detail``); returns since when,
        as text."""
        since = self._problems.get(what, (time.time(), None))[0]
        self._problems[what] = (since, detail)
        self._metrics.problem(what, detail, since)
        return stamp(since)

    def solved(self, what):
        """``what`` is fine again; whether it was wrong."""
        if self._problems.pop(what, None) is not None:
            self._metrics.problem(what, None, None)
            return True
        return False

    def note(self, what, detail):
        """A problem beside the tracker's line: ``...; <what> <detail>
        since <time>``; None: solved."""
        if detail is None:
            if self.solved(what):
                self._notifier.note(what, None)
            return
        since = self.problem(what, detail)
        self._notifier.note(what, f'{detail} (since {since})')

    def audit(self, kind, detail):
        """The audit failed or was skipped: the status line says so, and
        since when, instead of the last good tree's "in sync"."""
        since = self.problem('audit', f'{kind}: {detail}')
        self._notifier.set_status(f'audit {kind} since {since}: {detail}')


def stamp(seconds):
    """``2026-11-24 10:58:21Z``: when a problem began, in UTC."""
    return time.strftime('%Y-%m-%d %H:%M:%SZ', time.gmtime(seconds))
