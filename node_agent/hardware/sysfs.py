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
* Reads are bounded and never block: a file is opened non-blocking, must
  be a regular file (sysfs attributes are; a FIFO or a device is refused)
  and is read up to :data:`MAX_FILE_BYTES`; CPU lists are checked before
  they are expanded (:mod:`node_agent.hardware.cpulist`).
* Symlinks are read with ``readlink`` and reduced to their last component
  (a PCI address, a driver name, an iommu group number), which is all the
  kernel layout promises.
"""

import os
import re
import stat

from node_agent import exception
from node_agent.hardware import cpulist

PCI_ADDRESS_RE = re.compile(r'^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$')
# sysfs attributes are one page; anything longer is not an attribute.
MAX_FILE_BYTES = 64 * 1024


class SysfsReader:
    """Reads files, directories and links under one sysfs root."""

    def __init__(self, root='/sys'):
        self.root = os.path.abspath(root)

    def path(self, rel):
        return os.path.join(self.root, rel)

    def check_root(self):
        """ScanIncomplete unless the root is a directory we can list."""
        try:
            os.listdir(self.root)
        except OSError as exc:
            raise exception.ScanIncomplete(
                'sysfs', f'{self.root}: {exc.strerror or exc}') from None

    def _error(self, rel, reason):
        return exception.SysfsReadError(rel, reason)

    def exists(self, rel):
        return os.path.exists(self.path(rel))

    def is_dir(self, rel):
        return os.path.isdir(self.path(rel))

    def is_link(self, rel):
        return os.path.islink(self.path(rel))

    def listdir(self, rel):
        """Sorted entry names of a directory; SysfsReadError if it is gone."""
        try:
            return sorted(os.listdir(self.path(rel)))
        except OSError as exc:
            raise self._error(rel, exc.strerror or str(exc)) from None

    def read(self, rel):
        """The file's text, stripped of surrounding whitespace."""
        try:
            # O_NONBLOCK: opening a FIFO must not wait for a writer.
            fd = os.open(self.path(rel), os.O_RDONLY | os.O_NONBLOCK)
        except OSError as exc:
            raise self._error(rel, exc.strerror or str(exc)) from None
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise self._error(rel, 'not a regular file')
            data = os.read(fd, MAX_FILE_BYTES + 1)
        except OSError as exc:
            raise self._error(rel, exc.strerror or str(exc)) from None
        finally:
            os.close(fd)
        if len(data) > MAX_FILE_BYTES:
            raise self._error(rel, f'larger than {MAX_FILE_BYTES} bytes')
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
            return cpulist.parse(text)
        except ValueError as exc:
            raise self._error(
                rel, f'not a cpu list: {text[:40]!r}: {exc}') from None

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
