"""What to do with nova's one-time-use devices: pure decisions.

Nothing here reads or writes: the facts come in as values (nova's
providers, the guests' PCI devices, the usages, the records of earlier
tries) and a decision goes out.
"""

import fnmatch

ONE_TIME_USE_TRAIT = 'HW_PCI_ONE_TIME_USE'

# What node_agent_one_time_use{state} says of a device, and what the status
# line says of the waiting ones.
IN_USE = 'in_use'               # a guest holds it in Placement: nova's
WAITING = 'waiting'             # to be cleaned, first try not made yet
CLEANING = 'cleaning'
FAILED = 'cleaner_failed'       # the action exited non-zero
TIMED_OUT = 'timed_out'
CHECK_FAILED = 'check_failed'   # cleaned, but a check after it failed
GUEST_HOLDS = 'guest_holds'     # a libvirt domain has it, no allocation
UNHEALTHY = 'unhealthy'         # reserved for its health: not cleaned
NO_ACTION = 'no_action'         # no [one_time_use] actions entry
GONE = 'gone'                   # not on the PCI bus
BUSY = 'busy'                   # another process cleans it now

# The states a later audit tries again, after the back-off.
RETRIED = (FAILED, TIMED_OUT, CHECK_FAILED, GUEST_HOLDS, GONE, BUSY)
ACTIONS = ('reset', 'nvme', 'command')


def parse_actions(entries):
    """``[(match, action)]`` of ``[one_time_use] actions`` entries
    (``10de:2330=command``), in order; the option's type checked them."""
    found = []
    for entry in entries:
        match, _, action = entry.strip().rpartition('=')
        found.append((match.lower(), action))
    return found


def action_for(actions, vendor, product, pci_class):
    """The action of the first entry matching the device, or None.

    ``vendor``/``product``: 4 hex digits; ``pci_class``: 6 hex digits."""
    for match, action in actions:
        if match.startswith('class:'):
            if pci_class.lower().startswith(match[len('class:'):]):
                return action
        elif fnmatch.fnmatchcase(f'{vendor}:{product}'.lower(), match):
            return action
    return None


def reserved_whole(provider):
    """Whether every inventory of ``provider`` is reserved in full, as nova
    leaves a one-time-use device its guest used."""
    records = provider.inventory.values()
    return bool(records) and all(
        rec.get('total', 0) > 0 and rec.get('reserved', 0) >= rec['total']
        for rec in records)


def candidates(devices):
    """``{address: provider}`` among nova's PCI providers ``devices`` that
    are one-time-use and reserved in full: to clean unless a guest still
    has them."""
    return {address: provider for address, provider in devices.items()
            if ONE_TIME_USE_TRAIT in provider.traits
            and reserved_whole(provider)}


def held_by(guests):
    """What the status line says of a device ``guests`` (domain uuids,
    :func:`node_agent.hardware.holders.holders`) hold."""
    noun = 'guest' if len(guests) == 1 else 'guests'
    return f'held by {noun} ' + ', '.join(guests)


def backoff(failures, initial, maximum):
    """Seconds before the next try after ``failures`` failed in a row."""
    return min(maximum, initial * 2 ** max(0, failures - 1))


def due(record, now):
    """Whether a device with ``record`` (None: never tried) may be tried
    now."""
    return record is None or record.get('next_try', 0) <= now


def summary(records):
    """The status line's part: ``1 one-time-use device waiting:
    0000:81:00.0: cleaner exit 3``; '' when none waits."""
    waiting = sorted((address, rec) for address, rec in records.items()
                     if rec['state'] != IN_USE)
    if not waiting:
        return ''
    noun = 'device' if len(waiting) == 1 else 'devices'
    return f'{len(waiting)} one-time-use {noun} waiting: ' + ', '.join(
        f'{address}: {rec["reason"]}' for address, rec in waiting)
