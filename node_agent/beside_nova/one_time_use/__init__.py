"""Nova's one-time-use devices made ready again: cleaned, checked, given
back.

Nova (32 and later) reserves a PCI device marked ``"one_time_use": true``
in ``[pci] device_spec`` when a guest gets it: its provider (trait
``HW_PCI_ONE_TIME_USE``) gets ``reserved = total``, and nova never sets it
back: ``pci_placement_translator`` sends such a provider ``total`` and
``max_unit``, plus ``reserved = total`` only while a guest holds the
device, and nova's provider tree compares only the fields it is sent
(``ProviderTree.has_inventory_changed``), so after the guest nova writes
nothing and the reservation stays (nor does it write back a ``reserved``
the agent sets to 0).  Making
the device ready is the operator's job; beside nova-compute the agent does
it::

    audit (tracker, after its sync)
      nova's PCI providers under the root      (beside_nova.nova_pci)
        one-time-use, reserved = total         policy.candidates
        no guest holds the device              hardware.holders: its PCI
                                               hostdev, an mdev on it or
                                               on its VF, its VF
        used = 0                               GET .../usages, those only
        not reserved for its health, an action configured for its kind,
        its back-off over                      manager.Manager._decide
      -> a thread: cleaning.Cleaning.clean     lock, action, checks,
                                               reserved = 0 on nova's
                                               provider (that field alone)

Rules:

- A device a guest holds (a libvirt domain, or an allocation) is never
  touched; nor one another process cleans (a lock per device, inherited
  by the cleaner).
- Nothing is given back unless the action succeeded and the checks
  passed; a failing, timed-out or unsafe clean keeps the device reserved,
  says why (log, status line, ``node_agent_one_time_use{address,state}``,
  a ``node_agent.device.one_time_use`` notification) and is tried again
  with capped back-off (``[one_time_use] retry_initial``, ``retry_max``).
- What was tried lives in ``state_path`` (:mod:`.record`): a restart
  keeps the back-off, and a clean cut short is done again, never taken as
  done.
- ``node-agent-manage device clean ADDRESS`` runs the same clean by hand
  (:mod:`node_agent.cmd.manage.clean`).
"""

from node_agent.beside_nova import nova_pci

TITLE = 'One-time-use devices not ready'


def audit(conf, found, make, last, unhealthy):
    """The tracker's hook, after round ``last`` synced its tree and before
    its health hook (:mod:`node_agent.beside_nova.nova_pci`) changes what
    the tree says of nova's PCI providers; the devices the agent reserved
    for their health are not one-time-use reservations, never cleaned.
    Returns the tracker's manager (``found``, or ``make()``'s at the first
    call)."""
    # A --once run beside the daemon leaves the cleans to the daemon.
    tree = last.tree
    root = tree.find(last.nodename)
    if root is None or not conf.one_time_use.enabled or (
            'once' in conf and conf.once):
        return found
    health = nova_pci.Reservations.from_conf(conf).load()
    found = found or make()
    found.audit({a: p for a, p in nova_pci.nova_devices(tree, root).items()
                 if p.uuid not in health},
                last.snapshot, unhealthy)
    return found


def render(records):
    """``device list``'s lines for ``{address: record}``."""
    from node_agent.beside_nova.one_time_use import policy
    return [f'  {address}  {rec["state"]}: {rec["reason"]}'
            for address, rec in sorted(records.items())
            if rec.get('state') != policy.IN_USE]
