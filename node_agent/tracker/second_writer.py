"""Another writer of what the agent writes: the root (``RootShared``), or
its own providers (``ProvidersShared``).

Evidence of a root another service writes (:meth:`node_agent.beside_nova.
root.RootFinder.other_writer`, and :meth:`Watch.rewritten` here): another
service says it writes the root, or the root's inventory or traits differ
from what the agent last synced at two reads in a row (one operator edit
is corrected once; a second writer undoes the correction: a write war).
While either holds, the agent writes nothing: :meth:`Watch.refuse` raises
``RootShared``, and says when it ends.

Another writer of the agent's own providers below the root (another agent
with the same ``[DEFAULT] host``: a copied config, a re-imaged host beside
the old one) shows the same way: at two reads in a row, a provider the
agent owns has other values than the agent wrote in the inventory or
traits it set (:func:`rewritten`)::

    read   provider as Placement has it  vs  as this agent last wrote it
             same in what the agent set        nothing (count back to 0)
             differs, first read in a row      corrected once (an edit)
             differs, again                    another writer:
               its values offer more somewhere   keep writing, say so
               (more units unreserved)           (the safer view stays)
               they offer no more                stop writing (audit
                                                 skipped): ProvidersShared

Of two agents each correcting the other, the one whose view offers less
(a drained device reserved, a device missing) goes on writing and the
other stops: what Placement offers never grows by the war.  The stopped
one writes again once Placement holds what it would write (the other
stopped, or agrees), or at its restart.  Only what the agent set counts:
a trait an operator adds, another service's inventory on the provider,
allocations (they move generations, nothing the agent set) are no
rewrite; beside nova-compute its root is nova's and not compared.
"""

import dataclasses

from oslo_log import log as logging

from node_agent import exception
from node_agent import identity
from node_agent import provider_tree as ptree
from node_agent.beside_nova import root as root_mod

LOG = logging.getLogger(__name__)


class Watch:
    """Who else writes the root, across the rounds of one tracker."""

    def __init__(self, conf, root, metrics):
        """``root``: the tracker's
        :class:`~node_agent.beside_nova.root.RootFinder`."""
        self._conf = conf
        self._root = root
        self._metrics = metrics
        self.shared = None              # RootShared, while refusing
        self._rewrites = 0              # reads in a row the root moved
        self._added_root_traits = frozenset()
        self._others = 0                # reads in a row providers moved
        # (action, evidence, more, provider uuids) said last, or None
        self.other = None

    def rewritten(self, tree, last_good, nodename):
        """Evidence that another service rewrites the root the agent
        owns, or None."""
        if not self._root.owns_root or last_good is None:
            return None
        root = tree.roots[0]
        mine = last_good.find(root.uuid)
        if mine is None:
            return None
        undone = root_mod.undone(root, mine)
        added = frozenset(root.traits - mine.traits)
        if added != self._added_root_traits:
            # Another writer's own traits (an operator's, a service's):
            # kept, and no takeover; said once per change.
            self._added_root_traits = added
            if added:
                LOG.info('%s: the root carries traits the agent did not '
                         'set, kept as they are (not a second writer: only '
                         "writes to the agent's own traits and inventory "
                         'count): %s', nodename, ', '.join(sorted(added)))
        self._rewrites = self._rewrites + 1 if undone else 0
        if self._rewrites < 2:
            return None
        return ('rewritten', f'root {root.name} ({root.uuid}) was rewritten '
                'under the agent again after it corrected it (generation '
                f'{root.generation}: {undone})')

    def refuse(self, nodename, last_good, tree=None, ownership=None):
        """Raise ``RootShared`` while another service writes the root,
        ``ProvidersShared`` while another writer rewrites the agent's
        providers with values that offer no more.  Without ``tree``, only
        what is seen on this host (before the tree is read)."""
        found = self._root.other_writer(tree, ownership)
        rewritten = (self.rewritten(tree, last_good, nodename)
                     if tree is not None else None)
        if rewritten is not None:
            service, evidence = found or ('another service', [])
            found = service, evidence + [rewritten]
        if found is None:
            if self.shared is not None and tree is not None:
                LOG.info('%s: no other writer of the root any more',
                         nodename)
                self.shared = None
                self._metrics.root_shared(None)
            if tree is not None:
                self._other_writer(tree, last_good, nodename, ownership)
            return
        service, evidence = found
        error = exception.RootShared(self._root.layout.mode, nodename,
                                     service, [e for _, e in evidence])
        self.shared = error
        self._metrics.root_shared(service, [k for k, _ in evidence])
        raise error

    def _other_writer(self, tree, last_good, nodename, ownership):
        """Another writer of the agent's providers below the root: said
        once per change, ``ProvidersShared`` while this agent yields."""
        found = rewritten(tree, last_good, ownership)
        self._others = self._others + 1 if found else 0
        said = None
        # Once stopped, stopped while Placement holds other values: a
        # third writer's edit does not restart the war.
        stopped = bool(found) and _key(self.other) is not None \
            and self.other[0] == STOPPED
        if self._others >= 2 or stopped:
            more = [f'{p.name}: {", ".join(rcs)}' for p, rcs in
                    ((p, offers_more(p, mine)) for p, mine, _ in found)
                    if rcs]
            evidence = [f'{p.name} ({p.uuid}) rewritten under the agent '
                        f'again after it corrected it (generation '
                        f'{p.generation}: {what})' for p, _, what in found]
            said = (KEPT if more and not stopped else STOPPED, evidence,
                    more, sorted(p.uuid for p, _, _ in found))
        if _key(said) != _key(self.other):
            self._say(said, nodename)
        self.other = said
        if said and said[0] == STOPPED:
            raise exception.ProvidersShared(nodename, said[1])

    def _say(self, said, nodename):
        if said is None:
            LOG.info('%s: no other writer of its providers any more',
                     nodename)
            self._metrics.second_writer(None)
            return
        action, evidence, more, _ = said
        self._metrics.second_writer(action, [REWRITTEN])
        if action == KEPT:
            LOG.warning(
                '%s: another writer (another agent with this host?) '
                'rewrites its providers: %s; its values offer more (%s), '
                'so this agent keeps writing its own', nodename,
                '; '.join(evidence), '; '.join(more))


REWRITTEN = 'rewritten'
KEPT = 'kept'           # this agent goes on writing (it offers less)
STOPPED = 'stopped'     # this agent writes nothing (it offers as much)


def _key(said):
    """What a change of :attr:`Watch.other` is said by: the action and
    the providers (not their generations, which the war moves)."""
    return None if said is None else (said[0], said[3])


def rewritten(tree, last_good, ownership=None):
    """``[(provider, mine, what)]``: the providers below the root the
    agent owns whose inventory or traits it set differ, in ``tree`` (as
    Placement has them), from ``last_good`` (as the agent last wrote
    them).  Pure."""
    if last_good is None:
        return []
    found = []
    for provider in tree.providers():
        mine = last_good.find(provider.uuid)
        if provider.parent_uuid is None or mine is None:
            continue
        record = identity.ownership_of(provider, tree, ownership)
        if not record.owned:
            continue
        what = root_mod.undone(provider, _set_by_agent(mine, record))
        if what:
            found.append((provider, mine, what))
    return found


def _set_by_agent(mine, record):
    """``mine`` with only the classes and traits ``record`` says the
    agent set (all of them when it recorded none)."""
    if not record.resource_classes and not record.traits:
        return mine
    return dataclasses.replace(
        mine, traits=set(mine.traits) & set(record.traits),
        inventory={rc: r for rc, r in mine.inventory.items()
                   if rc in record.resource_classes})


def offered(record):
    """Units a provider's inventory ``record`` offers."""
    rec = ptree.normalize_inventory(record)
    return (rec['total'] - rec['reserved']) * rec['allocation_ratio']


def offers_more(provider, mine):
    """Resource classes whose inventory on ``provider`` (another writer's)
    offers more units than ``mine`` (this agent's).  Pure."""
    return sorted(rc for rc, record in mine.inventory.items()
                  if rc in provider.inventory
                  and offered(provider.inventory[rc]) > offered(record))
