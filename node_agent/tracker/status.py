"""The operator's view of this host's tree in Placement (``tree show``).

Pure: a :class:`~node_agent.provider_tree.ProviderTree` read from Placement
and the usages per provider become rows, then a table or JSON.  Usages are
``{provider uuid: {resource class: used}}``.  ``unclaimed`` is what
:meth:`~node_agent.claims.manager.ClaimManager.unclaimed_allocations`
returns (``{consumer: {provider uuid: {resource class: n}}}``), or None
when it could not be worked out; the table ends with a section
"allocations with neither claim nor guest".

::

    compute1                         VCPU 0/32 (reserved 0)  MEMORY_MB ...
      compute1_numa_0   HW_NUMA_ROOT VCPU 2/16 (reserved 0)
        compute1_pci_0000_3b_00_0    VGPU 1/16 (reserved 0)

And the daemon's own status line, a pure function of the tracker's last
:class:`~node_agent.tracker.round.Round` (:func:`line`), and the lines a
plan about to be written is logged with (:func:`log_plan`).
"""

import collections
import json

from oslo_log import log as logging

from node_agent import text
from node_agent.beside_nova import coexistence

# The plan is logged as the tracker's (what operators filter on).
LOG = logging.getLogger('node_agent.tracker.tracker')

STATUS_RESTART = 'restart required: reshape pending'


def line(last, cleans='', health=''):
    """The status line of round ``last``; ``cleans``: what the
    one-time-use cleans say now, ``health``: what device health says."""
    if last.problem is not None:
        said = last.problem.status
    elif last.reshape_pending:
        said = STATUS_RESTART
    else:
        count = len(last.tree) if last.tree is not None else 0
        said = f'in sync: {text.plural(count, "provider")}'
    notes = [last.root_note] if last.root_note else []
    notes += coexistence.status_notes(last.skipped, last.withheld,
                                      last.kept, last.not_attachable)
    notes += [last.unselected] if last.unselected else []
    notes += [cleans] if cleans else []
    notes += [] if last.problem is not None else list(last.guest_notes)
    notes += [f'warning: {why}' for why in last.unreadable.values()]
    notes += [health] if health else []
    # What --once prints and the log says, as the status systemd shows.
    return text.printable('; '.join([said] + notes))


def log_plan(plan):
    """The plan about to be written: one INFO line saying what kinds of
    change it makes and how many, then one DEBUG line per change (the
    lines ``node-agent-manage reshape plan`` prints)."""
    head, *details = plan.lines()
    counts = collections.Counter(row.split(':', 1)[0] for row in details)
    LOG.info('%s%s', head, ': ' + ', '.join(
        f'{what} {n}' for what, n in counts.items()) if counts else '')
    for row in details:
        LOG.debug('%s', row)


def rows(tree, usages=None):
    """One dict per provider, parents first, with depth for indenting."""
    usages = usages or {}
    result = []
    for provider in tree.providers():
        depth = len(tree.ancestors(provider.uuid))
        parent = tree.find(provider.parent_uuid) if provider.parent_uuid \
            else None
        used = usages.get(provider.uuid, {})
        result.append({
            'name': provider.name,
            'uuid': provider.uuid,
            'parent': parent.name if parent is not None else None,
            'generation': provider.generation,
            'depth': depth,
            'inventory': {
                rc: {'total': rec['total'], 'reserved': rec['reserved'],
                     'used': used.get(rc, 0),
                     'allocation_ratio': rec['allocation_ratio']}
                for rc, rec in sorted(provider.inventory.items())},
            'traits': sorted(provider.traits),
        })
    return result


UNCLAIMED_TITLE = 'allocations with neither claim nor guest'


def unclaimed_rows(tree, unclaimed):
    """One dict per consumer: ``{"consumer", "providers": {name: {rc:
    n}}}``; a provider no longer in the tree keeps its uuid."""
    result = []
    for consumer, resources in sorted((unclaimed or {}).items()):
        providers = {}
        for rp, rcs in resources.items():
            provider = tree.find(rp)
            providers[provider.name if provider is not None else rp] = \
                dict(sorted(rcs.items()))
        result.append({'consumer': consumer,
                       'providers': dict(sorted(providers.items()))})
    return result


def render_json(tree, usages=None, unclaimed=None):
    """``{"providers": [...]}``, plus ``"unclaimed_allocations"`` (one
    entry per consumer) when ``unclaimed`` is not None."""
    body = {'providers': rows(tree, usages)}
    if unclaimed is not None:
        body['unclaimed_allocations'] = unclaimed_rows(tree, unclaimed)
    return json.dumps(body, indent=2, sort_keys=True)


def render_unclaimed(tree, unclaimed):
    """The "allocations with neither claim nor guest" section."""
    lines = [f'{UNCLAIMED_TITLE}:']
    entries = unclaimed_rows(tree, unclaimed)
    for entry in entries:
        for name, rcs in entry['providers'].items():
            amounts = ', '.join(f'{rc}={n}' for rc, n in rcs.items())
            lines.append(f'  {entry["consumer"]}  {text.printable(name)}: '
                         f'{amounts}')
    if not entries:
        lines.append('  none')
    return '\n'.join(lines)


def render_table(tree, usages=None, unclaimed=None, long=False,
                 folded=frozenset()):
    """A fixed-width table: provider (indented by depth), with ``long``
    its uuid and generation, parent, inventory as ``RC used/total
    (reserved N)``, traits; then, with ``unclaimed``, the allocations
    nobody holds.  The traits of the providers in ``folded`` (uuids:
    nova-compute's root, whose ~80 capability traits came before the
    devices) are one line, ``N traits (--long lists them)``, unless
    ``long``."""
    ids = ('UUID', 'GEN') if long else ()
    header = ('PROVIDER',) + ids + (
        'PARENT', 'INVENTORY (used/total, reserved)', 'TRAITS')
    lines = []
    for row in rows(tree, usages):
        inventory = [f'{rc} {i["used"]}/{i["total"]} r{i["reserved"]}'
                     for rc, i in row['inventory'].items()] or ['-']
        traits = row['traits'] or ['-']
        if row['uuid'] in folded and not long and len(traits) > 1:
            traits = [f'{len(traits)} traits (--long lists them)']
        generation = '-' if row['generation'] is None else row['generation']
        # One line per inventory record or trait, whichever is longer, so
        # wide trees stay readable in a terminal.
        for n in range(max(len(inventory), len(traits))):
            first = n == 0
            lines.append((
                ('  ' * row['depth'] + text.printable(row['name']))
                if first else '',)
                + ((row['uuid'] if first else '',
                    generation if first else '') if long else ())
                + (text.printable(row['parent'] or '-') if first else '',
                   inventory[n] if n < len(inventory) else '',
                   traits[n] if n < len(traits) else ''))
    widths = [max(len(str(c)) for c in col)
              for col in zip(header, *lines)]
    out = []
    for line in [header] + lines:
        out.append('  '.join(str(c).ljust(w)
                             for c, w in zip(line, widths)).rstrip())
    if unclaimed is not None:
        out += ['', render_unclaimed(tree, unclaimed)]
    return '\n'.join(out)


def usages_from_allocations(allocations):
    """Sum consumers' allocations (``get_allocations_for_provider_tree``
    shape) into usages per provider."""
    usages = {}
    for record in (allocations or {}).values():
        for rp_uuid, alloc in record.get('allocations', {}).items():
            per_rp = usages.setdefault(rp_uuid, {})
            for rc, amount in alloc.get('resources', {}).items():
                per_rp[rc] = per_rp.get(rc, 0) + amount
    return usages
