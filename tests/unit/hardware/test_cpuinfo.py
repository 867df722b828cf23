"""/proc/cpuinfo: the first CPU's model and vendor."""

from node_agent.hardware import cpuinfo

# The first two CPUs of an x86_64 /proc/cpuinfo (abridged).
CPUINFO_X86 = """processor\t: 0
vendor_id\t: GenuineIntel
cpu family\t: 6
model\t\t: 106
model name\t: Intel(R) Xeon(R) Gold 6338 CPU @ 2.00GHz
flags\t\t: fpu vme de pse sse sse2

processor\t: 1
vendor_id\t: AuthenticAMD
model name\t: not the first CPU
"""

# aarch64 names no model, only numbers.
CPUINFO_ARM = """processor\t: 0
BogoMIPS\t: 50.00
Features\t: fp asimd evtstrm aes pmull sha1 sha2 crc32
CPU implementer\t: 0x41
CPU part\t: 0xd0c
"""


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
