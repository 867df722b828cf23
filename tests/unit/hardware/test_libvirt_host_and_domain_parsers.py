"""libvirt XML parsers: good input, and elements missing or garbled."""

import logging

from node_agent.hardware import libvirt_devices
from node_agent.hardware import libvirt_domains
from node_agent.hardware import libvirt_host

NODEDEV = """<device>
  <name>pci_0000_3b_00_0</name>
  <parent>computer</parent>
  <capability type='pci'>
    <class>0x030200</class>
    <domain>0</domain><bus>59</bus><slot>0</slot><function>0</function>
    <product id='0x1eb8'/><vendor id='0x10de'/>
    <capability type='mdev_types'>
      <type id='nvidia-222'>
        <name>GRID T4-1B</name><deviceAPI>vfio-pci</deviceAPI>
        <availableInstances>16</availableInstances>
      </type>
      <type id='nvidia-223'><name>GRID T4-2B</name></type>
    </capability>
    <capability type='virt_functions' maxCount='8'>
      <address domain='0x0000' bus='0x3b' slot='0x00' function='0x2'/>
    </capability>
    <numa node='1'/>
  </capability>
</device>"""

DOMAIN = """<domain type='kvm'>
  <name>vm1</name>
  <uuid>5C3F0F4E-8F0A-4A8E-9D2B-7C1A0E6D0001</uuid>
  <memory unit='KiB'>4194304</memory>
  <vcpu cpuset='0-7,^3'>2</vcpu>
  <numatune><memory nodeset='0'/><memnode cellid='1' nodeset='1'/></numatune>
  <devices>
    <hostdev mode='subsystem' type='mdev'>
      <source><address uuid='B1C6C2A1-3E5F-4C6B-9A2D-2F1E5D4C3B01'/></source>
    </hostdev>
    <hostdev mode='subsystem' type='pci'>
      <source><address domain='0x0000' bus='0x5e' slot='0x01'
               function='0x1'/></source>
    </hostdev>
    <hostdev mode='subsystem' type='pci'><source/></hostdev>
  </devices>
</domain>"""


def test_pci_node_device():
    dev = libvirt_devices.parse_pci_node_device(NODEDEV)
    assert dev.address == '0000:3b:00.0'
    assert dev.numa_node == 1
    assert dev.virt_functions == ('0000:3b:00.2',)
    assert [t.type_id for t in dev.mdev_types] == ['nvidia-222']
    assert dev.mdev_types[0].available_instances == 16


def test_mdev_type_without_available_instances_is_skipped(caplog):
    with caplog.at_level(logging.WARNING):
        libvirt_devices.parse_pci_node_device(NODEDEV)
    assert 'nvidia-223' in caplog.text
    assert 'pci_0000_3b_00_0' in caplog.text


def test_pci_node_device_without_address_is_skipped(caplog):
    xml = NODEDEV.replace('<bus>59</bus>', '')
    with caplog.at_level(logging.WARNING):
        assert libvirt_devices.parse_pci_node_device(xml) is None
    assert 'pci_0000_3b_00_0' in caplog.text


def test_garbled_xml_is_skipped(caplog):
    with caplog.at_level(logging.WARNING):
        assert libvirt_devices.parse_pci_node_device(NODEDEV[:200]) is None
        assert libvirt_domains.parse_domain('<domain><name>x', 'running') \
            is None
    assert 'does not parse' in caplog.text


def test_domain():
    dom = libvirt_domains.parse_domain(DOMAIN, 'running')
    assert dom.uuid == '5c3f0f4e-8f0a-4a8e-9d2b-7c1a0e6d0001'
    assert dom.mdevs == ('b1c6c2a1-3e5f-4c6b-9a2d-2f1e5d4c3b01',)
    assert dom.hostdevs == ('0000:5e:01.1',)
    assert dom.memory_mb == 4096
    assert dom.vcpus == 2
    assert dom.cpuset == {0, 1, 2, 4, 5, 6, 7}
    assert dom.numa_nodes == {0, 1}


def test_domain_without_uuid_is_skipped(caplog):
    xml = DOMAIN.replace('<uuid>5C3F0F4E-8F0A-4A8E-9D2B-7C1A0E6D0001</uuid>',
                         '')
    with caplog.at_level(logging.WARNING):
        assert libvirt_domains.parse_domain(xml, 'running') is None
    assert 'vm1' in caplog.text


def test_domain_without_memory_and_vcpu_is_kept_with_unknowns(caplog):
    xml = (DOMAIN.replace("<memory unit='KiB'>4194304</memory>", '')
           .replace("<vcpu cpuset='0-7,^3'>2</vcpu>", ''))
    with caplog.at_level(logging.WARNING):
        dom = libvirt_domains.parse_domain(xml, 'shutoff')
    assert (dom.memory_mb, dom.vcpus, dom.cpuset) == (0, 0, frozenset())
    assert 'vm1 has no <memory>' in caplog.text


def test_mdev_node_device_needs_a_known_parent(caplog):
    xml = """<device><name>mdev_x</name><parent>pci_0000_3b_00_0</parent>
      <capability type='mdev'><type id='nvidia-222'/>
      <uuid>b1c6c2a1-3e5f-4c6b-9a2d-2f1e5d4c3b01</uuid></capability>
      </device>"""
    mdev = libvirt_devices.parse_mdev_node_device(
        xml, {'pci_0000_3b_00_0': '0000:3b:00.0'})
    assert (mdev.parent, mdev.type_id) == ('0000:3b:00.0', 'nvidia-222')
    with caplog.at_level(logging.WARNING):
        assert libvirt_devices.parse_mdev_node_device(xml, {}) is None
    assert 'mdev_x' in caplog.text


def test_capabilities_without_cpu(caplog):
    with caplog.at_level(logging.WARNING):
        cpu = libvirt_host.parse_capabilities_cpu(
            '<capabilities><host/></capabilities>')
    assert cpu == {'arch': None, 'model': None, 'vendor': None,
                   'features': set()}
    assert '<host><cpu>' in caplog.text


def test_connection_hints():
    assert 'libvirtd' in libvirt_host.connection_hint(
        'qemu:///system', 'Failed to connect socket to ...: No such file')
    assert 'libvirt' in libvirt_host.connection_hint(
        'qemu:///system', 'Permission denied')
    assert 'test driver file' in libvirt_host.connection_hint(
        'test:///nowhere.xml', 'anything')


def test_sriov_port_interface_is_a_pci_hostdev(caplog):
    # nova-compute gives a port's VF as <interface type='hostdev'>.
    xml = DOMAIN.replace('<devices>', """<devices>
    <interface type='hostdev' managed='yes'>
      <mac address='fa:16:3e:11:22:33'/>
      <source><address type='pci' domain='0x0000' bus='0xd8' slot='0x02'
               function='0x3'/></source>
    </interface>
    <interface type='hostdev'><source/></interface>
    <interface type='bridge'><source bridge='br0'/></interface>""")
    with caplog.at_level(logging.WARNING):
        dom = libvirt_domains.parse_domain(xml, 'running')
    assert dom.hostdevs == ('0000:5e:01.1', '0000:d8:02.3')
    assert 'interface type="hostdev"' in caplog.text
    assert 'vm1' in caplog.text
