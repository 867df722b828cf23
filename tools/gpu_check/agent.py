"""Step 1: the agent's discovery on this host, and the trees it builds.

The agent runs as the quick start runs it (``tools/quickstart.sh``:
``etc/node-agent/quickstart.conf``, standalone, the embedded Placement
over SQLite), through the one composition root
(:mod:`node_agent.tracker.factory`): its startup pass and one audit, then
the tree is read back from that Placement and printed as ``node-agent-manage
tree show`` prints it.  Only the state directory is a fresh temporary one,
and ``[gpu] passthrough_devices`` names the NVIDIA GPUs discovery found,
as an operator would, so that they are in the tree (unconfigured, a GPU
gets no provider).

The ``beside_nova_compute`` shape is the drivers' tree for that mode over
the same snapshot, under a root standing for nova-compute's (same name
and uuid; its inventory and traits are nova's, not shown): printed, never
written.
"""

import os
import time

from node_agent import cmd
from node_agent import drivers
from node_agent import provider_tree
from node_agent.cmd.manage import hardware as hardware_cmd
from node_agent.cmd.manage import tree as tree_cmd
from node_agent.conf import nova as nova_conf
from node_agent.beside_nova import coexist
from node_agent.tracker import factory
from node_agent.tracker import status

REPO = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
CONFIG = os.path.join(REPO, 'etc', 'node-agent', 'quickstart.conf')


def load_conf(config_file, state_path, sysfs_root, libvirt_uri=None,
              deployment='standalone'):
    """The quick start's checked configuration, on a fresh state path."""
    conf = cmd.load_conf(['--config-file', config_file])
    conf.set_override('state_path', state_path)
    conf.set_override('deployment', deployment)
    conf.set_override('sysfs_root', sysfs_root, group='hardware')
    if libvirt_uri:
        conf.set_override('connection_uri', libvirt_uri, group='libvirt')
    return conf


class Result:
    """What step 1 found: the snapshot, the synced tree and its usages,
    the root's name, the NVIDIA GPUs."""

    def __init__(self):
        self.snapshot = None
        self.tree = None
        self.usages = None
        self.nodename = None
        self.gpus = ()


def standalone(conf, reader, say):
    """Sync this host into the embedded Placement; a :class:`Result`.

    ``reader``: the sysfs reader discovery reads through (it notes what
    it read, for the recording).  Raises what the agent raises.
    """
    found = Result()
    with factory.placement_adapter(conf) as adapter, \
            factory.tracker(conf, adapter) as rt:
        rt.host().reader = reader
        start = time.monotonic()
        scan = rt.host().scan()
        say(f'discovery (sysfs, libvirt, NVML): '
            f'{time.monotonic() - start:.2f} s, sources: '
            f'{", ".join(scan.sources)}')
        say(hardware_cmd.render_table(scan))
        found.gpus = tuple(g.address for g in scan.gpus
                           if g.vendor == 'nvidia')
        conf.set_override('passthrough_devices', list(found.gpus),
                          group='gpu')
        say(f'\n[gpu] passthrough_devices = {",".join(found.gpus) or "-"}'
            ' (the NVIDIA GPUs found)')
        start = time.monotonic()
        rt.startup()
        rt.audit()
        say(f'startup pass and one audit: {time.monotonic() - start:.2f} '
            f's; status: {rt.status_line()}')
        found.tree, found.usages = tree_cmd.read_tree(conf, adapter)
        found.snapshot, found.nodename = rt.round.snapshot, rt.round.nodename
    say('\nstandalone, in the embedded Placement (tree show --long):')
    say(status.render_table(found.tree, found.usages, long=True))
    return found


def beside_nova(conf, result, say):
    """Print the beside_nova_compute tree over ``result``'s snapshot, and
    what of it an audit would not offer since nova-compute (its
    configuration from ``[nova] config_file``) cannot attach it;
    ``(tree, [(provider, why)])``."""
    conf.set_override('passthrough_devices', list(result.gpus), group='gpu')
    root = result.tree.roots[0]
    tree = provider_tree.ProviderTree()
    tree.new_root(result.nodename, root.uuid)
    drivers.DriverSet(conf, result.snapshot).update_provider_tree(
        tree, result.nodename)
    say('\nbeside_nova_compute shape (printed, not written; the root is '
        "nova-compute's):")
    say(status.render_table(tree))
    not_offered = [
        (f'{name} {" ".join(classes)}', why)
        for name, classes, _, why in coexist.not_attachable_pci(
            tree, result.snapshot, nova_conf.read_nova_reports(conf))]
    if not_offered:
        say('not offered beside nova-compute (nova-compute cannot attach '
            'them):')
        for name, why in not_offered:
            say(f'  {name}: {why}')
    return tree, not_offered
