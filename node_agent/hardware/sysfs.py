"""The one reader of sysfs.

Every sysfs path the agent opens goes through a :class:`SysfsReader`, which
owns the root (``[hardware] sysfs_root``, ``/sys`` in production, a recorded
tree under ``tests/fixtures/hosts/`` in tests).  Paths passed to it are
relative to that root, written as the kernel lays sysfs out.

Rules:

* A file that is missing, unreadable, not ASCII or does not parse raises
  :class:`node_agent.exception.SysfsReadError` naming the path relative to the
  root; the collectors decide whether that skips a field or a whole device.
* Nothing here guesses: a value outside its plausible range is an error,
  not a default.
* Symlinks are read with ``readlink`` and reduced to their last component
  (a PCI address, a driver name, an iommu group number), which is all the
  kernel layout promises.
"""

import os
import re

from node_agent import exception

PCI_ADDRESS_RE = re.compile(r'^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$')


def parse_cpulist(text):
    """Parse a kernel cpu list ("0-3,8,10-11") into a frozenset of ints.

    Raises ValueError on anything else; an empty string is an empty set
    (a memory-only NUMA node).
    """
    cpus = set()
    text = text.strip()
    if not text:
        return frozenset()
    for part in text.split(','):
        lo, sep, hi = part.partition('-')
        if sep:
            first, last = int(lo), int(hi)
            if first > last or first < 0:
                raise ValueError(f'bad range {part!r}')
            cpus.update(range(first, last + 1))
        else:
            value = int(part)
            if value < 0:
                raise ValueError(f'negative cpu {part!r}')
            cpus.add(value)
    return frozenset(cpus)


class SysfsReader:
    """Reads files, directories and links under one sysfs root."""

    def __init__(self, root='/sys'):
        self.root = os.path.abspath(root)

    def path(self, rel):
        return os.path.join(self.root, rel)

    def _error(self, rel, reason):
        return exception.SysfsReadError(rel, reason)

    def exists(self, rel):
        return os.path.exists(self.path(rel))

    def is_dir(self, rel):
        return os.path.isdir(self.path(rel))

    def listdir(self, rel):
        """Sorted entry names of a directory; SysfsReadError if it is gone."""
        try:
            return sorted(os.listdir(self.path(rel)))
        except OSError as exc:
            raise self._error(rel, exc.strerror or str(exc)) from None

    def read(self, rel):
        """The file's text, stripped of surrounding whitespace."""
        try:
            with open(self.path(rel), 'rb') as f:
                data = f.read(65536)
        except OSError as exc:
            raise self._error(rel, exc.strerror or str(exc)) from None
        try:
            return data.decode('ascii').strip()
        except UnicodeDecodeError:
            raise self._error(rel, 'not ASCII text') from None

    def read_int(self, rel, minimum=None, maximum=None, base=10):
        text = self.read(rel)
        try:
            value = int(text, base)
        except ValueError:
            raise self._error(rel, f'not an integer: {text[:40]!r}') from None
        if minimum is not None and value < minimum:
            raise self._error(rel, f'{value} is below {minimum}')
        if maximum is not None and value > maximum:
            raise self._error(rel, f'{value} is above {maximum}')
        return value

    def read_hex(self, rel, digits):
        """A "0x..." id as exactly ``digits`` lower-case hex digits."""
        text = self.read(rel).lower()
        if not re.fullmatch(r'0x[0-9a-f]{%d}' % digits, text):
            raise self._error(
                rel, f'not a {digits}-digit hex id: {text[:40]!r}')
        return text[2:]

    def read_cpulist(self, rel):
        text = self.read(rel)
        try:
            return parse_cpulist(text)
        except ValueError:
            raise self._error(rel, f'not a cpu list: {text[:40]!r}') from None

    def readlink(self, rel):
        """Last component of a symlink's target."""
        try:
            target = os.readlink(self.path(rel))
        except OSError as exc:
            raise self._error(rel, exc.strerror or str(exc)) from None
        return os.path.basename(target.rstrip('/'))

    def link_target(self, rel):
        """A symlink's target resolved to a path relative to the root.

        None when it points outside the root (a recorded tree must not lead
        discovery into the real /sys).
        """
        try:
            target = os.path.realpath(self.path(rel), strict=True)
        except OSError as exc:
            raise self._error(rel, exc.strerror or str(exc)) from None
        if os.path.commonpath([self.root, target]) != self.root:
            return None
        return os.path.relpath(target, self.root)
