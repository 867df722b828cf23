"""CPU lists, the one parser: ``"0-3,8,10-11"`` and ``"0-7,^3"``.

The kernel writes CPU and node lists in sysfs (``cpulist``,
``thread_siblings_list``, ``cpu/online``); libvirt writes cpusets and
nodesets in domain XML; operators write ``[compute] cpu_shared_set`` and
``cpu_dedicated_set``.  They are one grammar, parsed here and nowhere else.

Rules:

* Every id is checked against :data:`MAX_CPUS` *before* a range is
  expanded: a 12-byte ``0-2000000000`` is refused in microseconds, never
  turned into two billion integers.  Ranges are merged before they are
  expanded, so a list repeating ``0-65535`` for 64 KB costs one expansion
  of 65536 ids, not one per part.
* Kernel lists (``spec=False``) are strict: no spaces, no empty parts, no
  exclusions.  Specs (``spec=True``, libvirt and Nova's syntax) allow
  spaces around parts, skip empty parts and subtract ``^n`` / ``^a-b``.
* Anything else raises ``ValueError`` saying which part is wrong; callers
  turn that into an error naming their file or option.
"""

#: Ids are below this.  Linux's NR_CPUS tops out at 8192 today; anything
#: at or above 65536 is a corrupt file, not a big machine.
MAX_CPUS = 1 << 16


def parse(text, spec=False, limit=MAX_CPUS):
    """The ids of a CPU (or NUMA node) list, as a frozenset of ints.

    An empty string is the empty set (a memory-only NUMA node).
    """
    include, exclude = [], []
    text = text.strip()
    if not text:
        return frozenset()
    for part in text.split(','):
        if spec:
            part = part.strip()
            if not part:
                continue
        target = include
        if spec and part.startswith('^'):
            target, part = exclude, part[1:]
        target.append(_range(part, limit))
    return frozenset(_expand(include)) - frozenset(_expand(exclude))


def _expand(ranges):
    """The ids of ``(first, last)`` ranges, each id produced once."""
    ids = []
    end = -1                    # every id up to here is produced
    for first, last in sorted(ranges):
        if last > end:
            ids.extend(range(max(first, end + 1), last + 1))
            end = last
    return ids


def _digits(text):
    return text.isascii() and text.isdigit()


def _range(part, limit):
    lo, sep, hi = part.partition('-')
    if not (_digits(lo) and (not sep or _digits(hi))):
        raise ValueError(f'bad part {part!r}')
    first = int(lo)
    last = int(hi) if sep else first
    if first > last:
        raise ValueError(f'bad range {part!r}')
    if last >= limit:
        raise ValueError(f'{last} in {part!r} is above the limit of '
                         f'{limit - 1}')
    return first, last


def to_text(cpus):
    """``{0, 1, 2, 5}`` -> ``"0-2,5"``."""
    ids = sorted(cpus)
    parts = []
    start = prev = None
    for cpu in ids + [None]:
        if cpu is not None and prev is not None and cpu == prev + 1:
            prev = cpu
            continue
        if start is not None:
            parts.append(str(start) if start == prev else f'{start}-{prev}')
        start = prev = cpu
    return ','.join(parts)
