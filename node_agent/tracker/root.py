"""Which provider is this host's root, as ``[DEFAULT] deployment`` says.

One place decides the root's uuid and name, and whether the agent may
create it; the tracker reads the tree through :meth:`RootFinder.read` and
takes the root's actual name as the prefix of every child::

    standalone            name [DEFAULT] host, uuid as recorded (else the
                          legacy uuid5 of the name); created when missing;
                          a root of that name with another uuid is adopted
    whole_host            name [DEFAULT] host, uuid = nova's compute node
                          uuid: [nova] compute_id_path when that file
                          exists, else $state_path/compute_id, written once
                          (0640) with the uuid the root of that name
                          already has in Placement, else the legacy uuid5
                          of the name, so an upgraded host keeps its root;
                          created when missing
    beside_nova_compute   nova-compute's root: by the uuid in [nova]
                          compute_id_path, else by the name [nova]
                          hypervisor_hostname; never created: until it
                          exists, ComputeNodeMissing (the daemon waits)

A compute_id file is read the way nova-compute reads it
(``nova/virt/node.py``): its first 40 characters, whitespace stripped,
one uuid.  A file that exists but cannot be read or holds no uuid, a root
of the same name with another uuid than the file's, or a provider of that
name that is not a root: ``ConfigError`` naming the file, the option and
both uuids, before anything is written.

The uuid, once found, is kept for the life of the process: audits read
the tree by it (one ``GET ?in_tree``), and a compute_id file that appears
later does not move the host to another root mid-run.
"""

import os
import uuid as uuidlib
from oslo_log import log as logging

from node_agent import deployment
from node_agent import exception
from node_agent import identity
from node_agent import local_state
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
    """The agent's own record of the compute node uuid (whole_host)."""
    return os.path.join(conf.state_path, COMPUTE_ID_FILE)


def root_name(conf):
    """The name the root is looked up or created by."""
    if conf.deployment == deployment.BESIDE_NOVA:
        return conf.nova.hypervisor_hostname or conf.host
    return conf.host


class RootFinder:
    """Finds (and where the mode allows, creates) this host's root."""

    def __init__(self, conf, client):
        self.conf = conf
        self.client = client
        self.mode = conf.deployment
        self.owns_root = deployment.owns_root(conf)
        self.uuid = None        # the root's uuid, once found
        self.source = None      # the compute_id file it came from
        made_safe = deployment.numa_made_safe(conf)
        if made_safe:
            LOG.info('%s', made_safe)

    def read(self, ensure=True):
        """The tree under this host's root.

        ``ensure=False`` writes nothing, to Placement or to state_path: a
        missing root gives the tree that creating it would make.
        """
        if self.mode == deployment.BESIDE_NOVA:
            tree = self._beside_nova()
        elif self.mode == deployment.WHOLE_HOST:
            tree = self._whole_host(ensure)
        else:
            tree = self._standalone(ensure)
        if ensure or self.mode == deployment.BESIDE_NOVA:
            self.uuid = tree.roots[0].uuid
        return tree

    # -- per mode -------------------------------------------------------

    def _standalone(self, ensure):
        name = self.conf.host
        if ensure:
            return self.client.get_provider_tree_and_ensure_root(name)
        return self._read_or_new(
            name, self.uuid or identity.legacy_root_uuid(name))

    def _whole_host(self, ensure):
        name = self.conf.host
        root_uuid, source = self._compute_node_uuid(name, write=ensure)
        if not ensure:
            tree = self._read_or_new(name, root_uuid, source)
        else:
            tree = self.client.get_provider_tree_and_ensure_root(name,
                                                                 root_uuid)
        found = tree.roots[0].uuid
        if found != root_uuid:
            # The report client adopted a root of that name: not nova's.
            raise _other_uuid(name, found, root_uuid, source)
        return tree

    def _beside_nova(self):
        if self.uuid is not None:
            return self._existing(self.uuid, 'found before, now gone')
        path = self.conf.nova.compute_id_path
        nova_uuid = read_compute_id(path, '[nova] compute_id_path')
        name = root_name(self.conf)
        if nova_uuid is not None:
            try:
                return self.client.get_provider_tree(nova_uuid)
            except exception.ResourceProviderNotFound:
                self._refuse_other_root(name, nova_uuid, path)
                raise exception.ComputeNodeMissing(
                    nova_uuid, f'the uuid in {path}') from None
        found = self._named_root(name)
        if found is None:
            raise exception.ComputeNodeMissing(
                name, f'[nova] hypervisor_hostname; {path} does not exist')
        return self._existing(found, f'named {name}')

    # -- helpers ----------------------------------------------------------

    def _compute_node_uuid(self, name, write):
        """``(uuid, file it comes from)`` of the compute node (whole_host).

        Once found it is kept; ``write`` creates the agent's own file
        when neither exists.
        """
        if self.uuid is not None:
            return self.uuid, self.source
        nova_path = self.conf.nova.compute_id_path
        own_path = own_compute_id_path(self.conf)
        for path, option in ((nova_path, '[nova] compute_id_path'),
                             (own_path, None)):
            found = read_compute_id(path, option)
            if found is not None:
                self.source = path
                return found, path
        root_uuid = self._named_root(name) or identity.legacy_root_uuid(name)
        if write:
            local_state.create_file(own_path, root_uuid + '\n')
            LOG.info('%s: compute node uuid %s recorded in %s (there is no '
                     '%s)', name, root_uuid, own_path, nova_path)
            self.source = own_path
        return root_uuid, own_path

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


def _other_uuid(name, found, wanted, source):
    return exception.ConfigError(
        f'root provider {name} is {found} in Placement, but the compute node '
        f'uuid in {source} is {wanted}: one host cannot have both; remove '
        'the stale provider or the file')
