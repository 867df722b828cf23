"""Another service writing the root the agent owns (``RootShared``).

Two kinds of evidence (:meth:`node_agent.beside_nova.root.RootFinder.
other_writer`, and :meth:`Watch.rewritten` here): another service says it
writes the root, or the root's inventory or traits differ from what the
agent last synced at two reads in a row (one operator edit is corrected
once; a second writer undoes the correction: a write war).  While either
holds, the agent writes nothing: :meth:`Watch.refuse` raises
``RootShared``, and says when it ends.
"""

from oslo_log import log as logging

from node_agent import exception
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
        """Raise ``RootShared`` while another service writes the root."""
        found = self._root.other_writer(tree, ownership)
        rewritten = (self.rewritten(tree, last_good, nodename)
                     if tree is not None else None)
        if rewritten is not None:
            service, evidence = found or ('another service', [])
            found = service, evidence + [rewritten]
        if found is None:
            if self.shared is not None:
                LOG.info('%s: no other writer of the root any more',
                         nodename)
                self.shared = None
                self._metrics.root_shared(None)
            return
        service, evidence = found
        error = exception.RootShared(self._root.layout.mode, nodename,
                                     service, [e for _, e in evidence])
        self.shared = error
        self._metrics.root_shared(service, [k for k, _ in evidence])
        raise error
