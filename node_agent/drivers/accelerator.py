"""The accelerator driver: allow-listed PCI devices such as FPGAs.

::

    <root>_numa_1
     +-- <root>_pci_0000_86_00_0     FPGA: 1, CUSTOM_FPGA_INTEL_ARRIA10,
                                     CUSTOM_OWNER_NODE_AGENT (standalone)

A device is reported only when an entry of ``[pci] device_allow_list``
names it (vendor_id, product_id, address glob; every given field must
match, the first matching entry wins), or beside nova-compute when nova's
own ``[pci] device_spec`` and ``[pci] alias`` do
(:mod:`node_agent.drivers.nova_devices`).  Everything else on the PCI bus is
never reported, so devices another agent (Cyborg) manages stay its own.
It asks for every allow-listed function and reports those the driver set
grants it (:func:`node_agent.drivers.registry.grant`): display functions
go to the GPU driver and PFs named in ``[nic] physical_device_mappings``
to the NIC driver first when those drivers are enabled (they come before
it), so no device is reported twice.

Each device is one provider with one unit of its resource class (the
entry's ``resource_class``; else FPGA for PCI class 0x12, else
``CUSTOM_PCI_<VENDOR>_<PRODUCT>`` as Nova names PCI devices in Placement)
and the entry's traits, under the NUMA node of the device.

On the accelerator path (``[accelerator] enabled`` beside nova-compute,
:attr:`node_agent.deployment.Layout.accelerators`) every accelerator
nova's configuration does not claim is reported too, and every device
nova did not select (allow-listed ones included) is offered as
``CUSTOM_NA_ACCELERATOR``, a class only a device profile asks for.

Managed on accelerator providers: FPGA, PGPU, ``CUSTOM_PCI_*``,
``CUSTOM_NA_ACCELERATOR``, and every class and trait any allow-list entry
names.
"""

import functools

from oslo_log import log as logging

from node_agent import deployment
from node_agent import identity
from node_agent.claims import fit
from node_agent.claims import model
from node_agent.conf import pci as pci_opts
from node_agent.drivers import base
from node_agent.drivers import device_spec
from node_agent.drivers import tree_edits
from node_agent.drivers import limits

LOG = logging.getLogger(__name__)

BASE_CLASSES = ('FPGA', 'PGPU', 'CUSTOM_PCI_*', deployment.NA_ACCELERATOR)
#: Where a device nova's configuration selects comes from.
NOVA_SELECTED = "nova's [pci] device_spec and [pci] alias"
#: Where a device the accelerator path selects comes from.
ACCEL_SELECTED = '[accelerator] enabled'


class AcceleratorDriver(base.Driver):
    name = 'accelerator'
    order = 40
    kinds = (identity.PCI,)

    @classmethod
    def hardware_limits(cls, snapshot):
        """Accelerator PCI functions, counted once with the GPU driver's
        whole GPUs."""
        found = frozenset(d.address for d in snapshot.accelerators())
        return {limits.WHOLE_DEVICE_CLASSES: (
            found, 'accelerator PCI functions'),
            limits.NA_WHOLE_CLASSES: (found, 'accelerator PCI functions')}

    @classmethod
    def list_opts(cls):
        return pci_opts.list_opts()

    @classmethod
    def check_options(cls, options):
        """Every entry of ``[pci] device_allow_list`` is JSON this driver
        takes (names the entry and the field)."""
        device_spec.parse_allow_list(options.pci.device_allow_list)

    def __init__(self, context):
        super().__init__(context)
        self.matchers = device_spec.parse_allow_list(
            self.options.pci.device_allow_list)
        self.managed_classes = set(BASE_CLASSES) | {
            m.resource_class for m in self.matchers if m.resource_class}
        self.managed_traits = set().union(*(m.traits for m in self.matchers))

    @functools.cached_property
    def allowed(self):
        """``[(device, matcher)]``: the allow-listed functions, and
        beside nova-compute those nova's configuration selects
        (:attr:`selection`)."""
        found = []
        for device in sorted(self.snapshot.pci_devices,
                             key=lambda d: d.address):
            if device.address in self.selection.excluded:
                continue        # [accelerator] exclude_devices
            matcher = next((m for m in self.matchers if m.matches(device)),
                           None)
            if matcher is None and \
                    device.address in self.selection.accelerators:
                matcher = device_spec.Matcher(
                    {'address': device.address}, NOVA_SELECTED)
            if matcher is None and \
                    device.address in self.selection.accel_accelerators:
                matcher = device_spec.Matcher(
                    {'address': device.address}, ACCEL_SELECTED)
            if matcher is not None:
                found.append((device, matcher))
        return found

    def pci_functions(self):
        """Every allow-listed function; a driver before this one (the GPU
        driver's display functions, the NIC driver's mapped PFs) takes
        its own first."""
        return [device.address for device, _ in self.allowed]

    @property
    def devices(self):
        """``[(device, matcher)]`` of the granted functions."""
        return [(device, matcher) for device, matcher in self.allowed
                if self.takes(device.address)]

    def applies(self, snapshot):
        return bool(self.devices)

    def build(self, provider_tree, nodename, current):
        wanted = set()
        for device, matcher in self.devices:
            provider = tree_edits.ensure_device(
                self.context, provider_tree, nodename,
                identity.pci_id(device.address), device.numa_node)
            if provider is None:
                continue
            wanted.add(provider.name)
            rc = self._class_for(device, matcher)
            tree_edits.set_inventory(provider_tree, provider,
                                     {rc: tree_edits.record(1)},
                                     self.managed_classes | {rc})
            tree_edits.set_traits(provider_tree, provider, matcher.traits,
                                  self.managed_traits)
        return wanted

    def claim_devices(self, ctx, provider, resource_class, amount):
        """On the accelerator path, the device of its provider (a bind
        answers its address); amounts only otherwise."""
        device = fit.device_of_provider(ctx.tree, provider)
        if resource_class != deployment.NA_ACCELERATOR or device is None \
                or device[1] not in {d.address for d, _ in self.devices}:
            return None
        address = device[1]
        if amount > 1 or address in ctx.held:
            raise fit.rejected(f'{amount} {resource_class} on provider '
                               f'{ctx.label(provider)}: accelerator '
                               f'{address} is in use', provider,
                               resource_class)
        return [model.Device(resource_class, provider, parent=address,
                             address=address)]

    def _class_for(self, device, matcher):
        """The class ``device`` is offered as: the accelerator path's
        for every device nova's configuration did not select."""
        if self.layout.accelerators and \
                device.address not in self.selection.accelerators:
            return deployment.NA_ACCELERATOR
        return matcher.resource_class_for(device)

    def affinity(self, domain):
        """A guest's allow-listed devices are on their own providers."""
        mine = {device.address for device, _ in self.devices}
        return [identity.pci_id(a) for a in sorted(domain.hostdevs)
                if a in mine], {}

    def domain_devices(self, domain, holder):
        """A guest's allow-listed devices, each the one unit of its class
        on its own provider (what the claims rebuild and the guests'
        comparison read)."""
        held = []
        for device, matcher in self.devices:
            if device.address not in domain.hostdevs:
                continue
            rc = self._class_for(device, matcher)
            rp = holder(rc, device.address)
            if rp:
                held.append(model.Device(rc, rp, parent=device.address,
                                         address=device.address))
        return tuple(held)
