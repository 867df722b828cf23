"""Which provider is this host's root, as ``[DEFAULT] deployment`` says.

One place decides the root's uuid and name, and whether the agent may
create it; the tracker reads the tree through :meth:`RootFinder.read` and
takes the root's actual name as the prefix of every child::

    beside_nova_compute   nova-compute's root: by the uuid in [nova]
      (the default;       compute_id_path, else by the uuid in
      whole_host runs     $state_path/compute_id (the record deprecated
      as it)              whole_host left), else by the name [nova]
                          hypervisor_hostname; never created: until it
                          exists, ComputeNodeMissing (the daemon waits)
    standalone            name [DEFAULT] host, uuid as recorded (else the
                          legacy uuid5 of the name); created when missing;
                          a root of that name with another uuid is adopted,
                          unless another service writes it (below)

A compute_id file is read the way nova-compute reads it
(``nova/virt/node.py``): its first 40 characters, whitespace stripped,
one uuid.  A file that exists but cannot be read or holds no uuid, a root
of the same name with another uuid than the file's, or a provider of that
name that is not a root: ``ConfigError`` naming the file, the option and
both uuids, before anything is written.

A host the deprecated ``whole_host`` synced keeps its root and children:

- nova's compute_id was there: the root is nova's compute node, the
  agent stops writing its inventory and traits (nova-compute's periodic
  writes them), children keep names and uuids: no reshape, nothing moved;
- the agent made the root under its own ``$state_path/compute_id``: that
  root is used, and the log and status line say what nova-compute needs
  to adopt it rather than fail with 409 on the name: that uuid in
  nova's compute_id (:attr:`RootFinder.note`) before its first start.

A root the agent owns (standalone) is shared with no one
(:meth:`RootFinder.other_writer`): nova's compute_id file, a provider
carrying ``OWNER_NOVA`` that the agent did not mark so, or a root that
another service created (it carries ``COMPUTE_NODE`` or inventory the
agent never wrote and not the agent's owner trait) is another writer, and so
is a root whose traits or inventory of the agent's own were rewritten
under the agent again after it corrected them (the tracker's check, with
:func:`undone`: one operator edit is corrected once; traits another
writer only added are kept, no takeover); the tracker then writes
nothing.

The uuid, once found, is kept for the life of the process: audits read
the tree by it (one ``GET ?in_tree``), and a compute_id file that appears
later does not move the host to another root mid-run.
"""

import dataclasses
import os
import uuid as uuidlib
from oslo_log import log as logging

from node_agent import deployment
from node_agent.drivers import registry
from node_agent import exception
from node_agent import identity
from node_agent import provider_tree as ptree

LOG = logging.getLogger(__name__)

COMPUTE_ID_FILE = 'compute_id'
# nova reads a uuid and "a little more to be graceful about whitespace".
COMPUTE_ID_READ = 40


def read_compute_id(path, option=None):
    """The uuid in compute_id file ``path``, or None when there is none.

    ``option`` names the option that gave the path, for the error.
    """
    where = f'{option} = {path}' if option else path
    try:
        with open(path, encoding='utf-8') as f:
            content = f.read(COMPUTE_ID_READ)
    except FileNotFoundError:
        return None
    except PermissionError as exc:
        from node_agent.conf import nova
        raise exception.ConfigError(
            f'{where}: the compute node identity file cannot be read: '
            f'{nova.why_unreadable(path, exc)}') from None
    except (OSError, ValueError) as exc:
        raise exception.ConfigError(
            f'{where}: the compute node identity file cannot be read: '
            f'{exc}') from None
    try:
        return str(uuidlib.UUID(content.strip()))
    except ValueError:
        raise exception.ConfigError(
            f'{where}: the compute node identity file holds no uuid '
            f'({content.strip()[:COMPUTE_ID_READ]!r})') from None


def own_compute_id_path(conf):
    """The agent's own record of the compute node uuid (written by the
    deprecated whole_host, read beside nova-compute)."""
    return os.path.join(conf.state_path, COMPUTE_ID_FILE)


def read_tree(conf, report_client, ensure=True, layout=None):
    """This host's tree in Placement, its root found as ``[DEFAULT]
    deployment`` says (:class:`RootFinder`; ``layout``: the caller's
    :class:`~node_agent.deployment.Layout`, else the registry builds it).

    ``ensure=False`` writes nothing: a missing root gives the tree that
    ensuring it would create.
    """
    if layout is None:
        layout = registry.layout(conf)
    return RootFinder(conf, report_client, layout).read(ensure)


class RootFinder:
    """Finds (and where the mode allows, creates) this host's root, as
    ``layout`` (the deployment's :class:`~node_agent.deployment.Layout`)
    says."""

    def __init__(self, conf, client, layout):
        self.conf = conf
        self.client = client
        self.layout = layout
        self.owns_root = self.layout.owns_root
        self.uuid = None        # the root's uuid, once found
        # The root's name when the last read created it (or, writing
        # nothing, would have): the plan's log counts it.
        self.created = None
        self.source = None      # the compute_id file it came from
        # What the operator must know about the root, for the status line.
        self.note = None
        if self.layout.deprecation:
            LOG.warning('%s', self.layout.deprecation)

    def name(self):
        """The name the root is looked up or created by."""
        if self.owns_root:
            return self.conf.host
        return self.conf.nova.hypervisor_hostname or self.conf.host

    def counted(self, plan):
        """``plan`` with the root the last read created (POSTed before
        any plan; dry, to be) among its created providers, so that its
        line counts every provider the round creates."""
        if not self.created:
            return plan
        return dataclasses.replace(plan, providers_created=(
            self.created,) + plan.providers_created)

    def read(self, ensure=True):
        """The tree under this host's root.

        ``ensure=False`` writes nothing, to Placement or to state_path: a
        missing root gives the tree that creating it would make.
        """
        if self.owns_root:
            tree = self._standalone(ensure)
        else:
            tree = self._beside_nova()
        if ensure or not self.owns_root:
            self.uuid = tree.roots[0].uuid
        return tree

    # -- per mode -------------------------------------------------------

    def _standalone(self, ensure):
        name = self.conf.host
        if ensure:
            tree, created = root_and_creation(self.client, name, self.uuid)
        else:
            tree = self._read_or_new(
                name, self.uuid or identity.legacy_root_uuid(name))
            created = tree.roots[0].generation is None
        self.created = name if created else None
        return tree

    def _beside_nova(self):
        if self.uuid is not None:
            return self._existing(self.uuid, 'found before, now gone')
        path = self.conf.nova.compute_id_path
        nova_uuid = read_compute_id(path, '[nova] compute_id_path')
        name = self.name()
        if nova_uuid is not None:
            self.source = path
            try:
                return self.client.get_provider_tree(nova_uuid)
            except exception.ResourceProviderNotFound:
                self._refuse_other_root(name, nova_uuid, path)
                raise exception.ComputeNodeMissing(
                    nova_uuid, f'the uuid in {path}') from None
        own_path = own_compute_id_path(self.conf)
        own_uuid = read_compute_id(own_path)
        if own_uuid is not None:
            tree = self._own_root(name, own_uuid, own_path, path)
            if tree is not None:
                return tree
        found = self._named_root(name)
        if found is None:
            raise exception.ComputeNodeMissing(
                name, f'[nova] hypervisor_hostname; {path} does not exist')
        return self._existing(found, f'named {name}')

    def _own_root(self, name, own_uuid, own_path, nova_path):
        """The root deprecated whole_host made under the agent's own
        compute_id, or None when it is not in Placement."""
        try:
            tree = self.client.get_provider_tree(own_uuid)
        except exception.ResourceProviderNotFound:
            return None
        self.source = own_path
        self.note = (
            f'nova-compute must adopt root {tree.roots[0].name} '
            f'({own_uuid}): write {own_uuid} to {nova_path} before '
            'nova-compute first starts')
        LOG.warning(
            'the root provider %s (%s) was created by node-agent\'s '
            'deprecated whole_host mode under its own compute node uuid '
            '(%s), and %s does not exist: the agent leaves the root to '
            'nova-compute and keeps its devices under it, but nova-compute '
            'would create its compute node with a new uuid and fail with '
            '409 on the name; %s', tree.roots[0].name, own_uuid, own_path,
            nova_path, self.note)
        return tree

    def other_writer(self, tree=None, ownership=None):
        """``(service, [(kind, evidence)])`` of another writer of a root
        the agent owns, or None.  Without ``tree`` only what is seen on
        this host (nova's compute_id file); ``ownership``: what the agent
        recorded it set on ``tree``'s providers.  Kinds: ``compute_id``,
        ``owner_nova``, ``foreign_root``."""
        if not self.owns_root:
            return None
        evidence = []
        path = self.conf.nova.compute_id_path
        nova_uuid = read_compute_id(path, '[nova] compute_id_path')
        if nova_uuid is not None:
            evidence.append((
                'compute_id', f'nova-compute\'s compute node identity file '
                f'{path} exists (uuid {nova_uuid})'))
        if tree is not None:
            evidence += _tree_evidence(tree, ownership or {})
        if not evidence:
            return None
        nova = nova_uuid is not None or any(
            'OWNER_NOVA' in e or 'COMPUTE_NODE' in e for _, e in evidence)
        return ('nova-compute' if nova else 'another service'), evidence

    # -- helpers ----------------------------------------------------------

    def _named_root(self, name):
        """Uuid of the root provider called ``name``, or None."""
        found = self.client.find_provider(name)
        if found is None:
            return None
        provider_uuid, root_uuid = found
        if provider_uuid != root_uuid:
            raise exception.ConfigError(
                f'provider {name} ({provider_uuid}) is not a root provider '
                f'(its root is {root_uuid}): it cannot be the compute node')
        return provider_uuid

    def _refuse_other_root(self, name, root_uuid, source):
        other = self._named_root(name)
        if other is not None and other != root_uuid:
            raise _other_uuid(name, other, root_uuid, source)

    def _existing(self, root_uuid, how):
        try:
            return self.client.get_provider_tree(root_uuid)
        except exception.ResourceProviderNotFound:
            raise exception.ComputeNodeMissing(root_uuid, how) from None

    def _read_or_new(self, name, root_uuid, source=None):
        """The tree under ``root_uuid``, or the one creating it would make
        (refused, as creating it would be, when ``name`` is another
        root's and ``source`` gave the uuid)."""
        try:
            return self.client.get_provider_tree(root_uuid)
        except exception.ResourceProviderNotFound:
            if source is not None:
                self._refuse_other_root(name, root_uuid, source)
            tree = ptree.ProviderTree()
            tree.new_root(name, uuid=root_uuid)
            return tree


def ensure_root(client, name, uuid=None):
    """The tree under the root called ``name``, created when missing; the
    root is recorded as the agent's (standalone: it was told to manage
    it).

    The uuid: ``uuid``, else the one SyncState recorded for ``name``,
    else the legacy rule's (:func:`node_agent.identity.legacy_root_uuid`).
    Steady state: one ``GET ?in_tree``.  With no record of the tree the
    root is POSTed first: a 200 means a brand-new, empty tree and no read
    is needed.  A root that vanished is created again.  A root of that
    name with another uuid (created by another service before the agent
    ran) is adopted.  The tree includes providers the agent does not own.
    """
    return root_and_creation(client, name, uuid)[0]


def root_and_creation(client, name, uuid=None):
    """:func:`ensure_root`'s tree, and whether the root was created."""
    root_uuid = (uuid or client.recorded_root(name)
                 or identity.legacy_root_uuid(name))
    if client.has_record(root_uuid):
        try:
            tree = client.get_provider_tree(root_uuid)
        except exception.ResourceProviderNotFound:
            LOG.warning('root provider %s (%s) vanished from Placement: '
                        'creating it again', name, root_uuid)
            tree = None
        else:
            client.claim_root(root_uuid)
            return tree, False
    created = client.create_root(name, root_uuid)
    if created is not None:
        return created, True
    try:
        tree = client.get_provider_tree(root_uuid)
    except exception.ResourceProviderNotFound:
        # A provider with our name but another uuid, e.g. created by
        # another service before the agent ran: that is our root.
        found = client.find_provider(name)
        if found is None:
            raise exception.ResourceProviderNotFound(name) from None
        tree = client.get_provider_tree(found[1])
    client.claim_root(tree.roots[0].uuid)
    return tree, False


def _tree_evidence(tree, ownership):
    """Signs in Placement that another service writes ``tree``'s root."""
    evidence = []
    for provider in tree.providers():
        own = ownership.get(provider.uuid)
        marked = (own is not None and own.owned
                  and deployment.OWNER_NOVA in own.traits)
        if deployment.OWNER_NOVA in provider.traits and not marked:
            evidence.append(('owner_nova', f'provider {provider.name} '
                             f'({provider.uuid}) carries OWNER_NOVA'))
    root = tree.roots[0]
    own = ownership.get(root.uuid)
    written = own is not None and (own.traits or own.resource_classes)
    if (not written and deployment.OWNER_NODE_AGENT not in root.traits
            and (deployment.COMPUTE_NODE in root.traits or root.inventory)):
        evidence.append((
            'foreign_root', f'root {root.name} ({root.uuid}) was created by '
            'another service: it carries '
            + ', '.join(sorted(root.traits) + sorted(root.inventory))
            + ', none of it written by node-agent'))
    return evidence


def undone(root, mine):
    """What of the agent's own on ``root`` (as Placement has it) differs
    from ``mine`` (the root as the agent last synced it), as text; '' when
    nothing.  Only the agent's traits and inventory count: a trait another
    writer added (an operator's, a service's own) is no rewrite."""
    changes = []
    removed = sorted(mine.traits - root.traits)
    if removed:
        changes.append('traits removed: ' + ', '.join(removed))
    for rc, record in sorted(mine.inventory.items()):
        theirs = root.inventory.get(rc)
        if theirs is None:
            changes.append(f'{rc} removed')
        elif ptree.normalize_inventory(theirs) != \
                ptree.normalize_inventory(record):
            changes.append(f'{rc} changed')
    return '; '.join(changes)


def _other_uuid(name, found, wanted, source):
    return exception.ConfigError(
        f'root provider {name} is {found} in Placement, but the compute node '
        f'uuid in {source} is {wanted}: one host cannot have both; remove '
        'the stale provider or the file')
