"""What one round of the tracker decided: a frozen value.

:meth:`~node_agent.tracker.tracker.ResourceTracker.startup` and
:meth:`~node_agent.tracker.tracker.ResourceTracker.audit` return a
:class:`Round`, and the tracker keeps the last one
(:attr:`~node_agent.tracker.tracker.ResourceTracker.round`), replaced in
one assignment.  A reader on another thread (the claims RPC) takes that
one value: never the tree of one round with the snapshot of another.

A round that wrote nothing (its scan not trusted, the root shared) keeps
what the last sync left (its tree, snapshot and ownership) and says why in
:attr:`Round.problem`; its :attr:`Round.plan` is None.  The status line is
a pure function of a round (:func:`node_agent.tracker.status.line`); what
the daemon makes of its problem is :mod:`node_agent.tracker.exit_policy`'s
table.
"""

import dataclasses
import typing

from node_agent import exception

#: Why a round wrote nothing (:attr:`Problem.kind`).
LIBVIRT = 'libvirt'     # libvirt was away: a wait, not a fault
SCAN = 'scan'           # a source of the scan was lost or garbled
SHARED = 'shared'       # another service writes the root the agent owns

STATUS_LIBVIRT = 'waiting for libvirt'


class Problem(typing.NamedTuple):
    """Why a round wrote nothing: ``kind`` (:data:`LIBVIRT`,
    :data:`SCAN`, :data:`SHARED`), ``detail`` (the error's text) and
    ``status`` (the head of the status line); ``error``: what was
    raised."""

    kind: str
    detail: str
    status: str
    error: Exception = None

    @classmethod
    def of(cls, error):
        """The problem of a round that raised ``error`` (a
        ``HardwareError`` or ``RootShared``)."""
        if isinstance(error, exception.RootShared):
            return cls(SHARED, str(error), error.status, error)
        if isinstance(error, exception.LibvirtConnectionError):
            return cls(LIBVIRT, str(error), f'{STATUS_LIBVIRT}: {error}',
                       error)
        return cls(SCAN, str(error), f'audit skipped: {error}', error)


@dataclasses.dataclass(frozen=True)
class Round:
    """One round's result.

    ``plan``: the plan this round applied (None: nothing written).
    ``tree``: the desired tree of the last sync (the *last good tree*),
    None before the first.  ``snapshot``: the scan it was built from;
    ``ownership``: what the agent could touch in it
    (:func:`node_agent.identity.owned`); ``nodename``: the root's name.
    Beside nova-compute, ``(ours, theirs, why)`` of the devices another
    service reports: ``skipped``, those of ours ``kept`` while they hold
    allocations, the VFs ``withheld`` from nova-compute's PCI tracker and
    the vGPUs ``not_attachable``; ``unselected``: the status note naming
    what nova's configuration would have the agent offer, when it offers
    nothing ('' else).  ``unreadable``: ``{file: why}`` of the
    evidence not read.  ``problem``: a :class:`Problem`, or None;
    ``incomplete``: what the sync left out although it wrote the rest;
    ``reshape_pending``: the reason, while a restart is required.
    ``root_note`` and ``guest_notes``: the status line's notes of the
    root finder and of the guests' comparison.
    """

    nodename: str
    plan: object = None
    tree: object = None
    snapshot: object = None
    ownership: typing.Mapping = None
    skipped: tuple = ()
    kept: tuple = ()
    withheld: tuple = ()
    not_attachable: tuple = ()
    unselected: str = ''
    unreadable: typing.Mapping = dataclasses.field(default_factory=dict)
    problem: Problem = None
    incomplete: str = None
    reshape_pending: str = None
    root_note: str = None
    guest_notes: tuple = ()

    @property
    def synced(self):
        """Whether this round wrote its plan (nothing kept it from it)."""
        return self.plan is not None

    def replace(self, **changes):
        """This round with ``changes``."""
        return dataclasses.replace(self, **changes)


@dataclasses.dataclass
class Pending:
    """A sync decided but not yet written: what its round will say."""

    snapshot: object
    current: object
    desired: object
    allocations: object
    plan: object
    ownership: object
    reshape_pending: str = None     # the last good tree kept: why
    beside: dict = dataclasses.field(default_factory=dict)
    incomplete: str = None
    #: The health view the round built with
    #: (:class:`~node_agent.health.model.View`).
    health: object = None
