"""/proc/cpuinfo: the first CPU's model and vendor."""

from node_agent.hardware import cpuinfo
from tests.fixtures.cpuinfo import CPUINFO_ARM
from tests.fixtures.cpuinfo import CPUINFO_X86


def test_cpuinfo_gives_the_first_cpus_model_and_libvirts_vendor():
    assert cpuinfo.parse(CPUINFO_X86) == {
        'model': 'Intel(R) Xeon(R) Gold 6338 CPU @ 2.00GHz',
        'vendor': 'Intel'}
    amd = CPUINFO_X86.replace('GenuineIntel', 'AuthenticAMD', 1)
    assert cpuinfo.parse(amd)['vendor'] == 'AMD'


def test_cpuinfo_without_a_model_name_says_none():
    assert cpuinfo.parse(CPUINFO_ARM) == {
        'model': None, 'vendor': None}
    assert cpuinfo.parse('') == {'model': None, 'vendor': None}
