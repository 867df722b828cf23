"""This machine's CPU as the kernel describes it (``/proc/cpuinfo``).

Read only where libvirt's description is invented (its test driver's
built-in host, :data:`~node_agent.hardware.libvirt_host.INVENTED_HOST`):
libvirt's own host CPU, from a real libvirtd, is always preferred.  The
model is the kernel's name for the CPU (``AMD EPYC 7763 64-Core
Processor``), not one of libvirt's CPU map, so nothing is expanded from it.
The path is a parameter, so a recorded file can stand in.
"""

from oslo_log import log as logging

LOG = logging.getLogger(__name__)

CPUINFO = '/proc/cpuinfo'
# x86 vendor_id (the CPUID vendor string) -> libvirt's <vendor> name.
_X86_VENDORS = {'GenuineIntel': 'Intel', 'AuthenticAMD': 'AMD',
                'HygonGenuine': 'Hygon'}
UNKNOWN = {'model': None, 'vendor': None}


def parse(text):
    """``{'model': ..., 'vendor': ...}`` of the first CPU in the text of
    ``/proc/cpuinfo`` (None where it does not say).

    x86 has ``model name`` and ``vendor_id`` (``AuthenticAMD`` becomes
    libvirt's ``AMD``); other architectures name the model ``cpu model``
    or ``Model``, or not at all.
    """
    fields = {}
    for line in text.splitlines():
        if not line.strip():
            if fields:
                break               # the end of the first CPU's block
            continue
        key, sep, value = line.partition(':')
        if sep:
            fields.setdefault(key.strip().lower(), value.strip())
    model = next((fields[k] for k in ('model name', 'cpu model', 'model')
                  if fields.get(k) and not fields[k].isdigit()), None)
    vendor = fields.get('vendor_id') or None
    return {'model': model, 'vendor': _X86_VENDORS.get(vendor, vendor)}


def read(path=CPUINFO):
    """:func:`parse` of the file at ``path``; unknown (and said at INFO)
    when it cannot be read."""
    try:
        with open(path, encoding='utf-8', errors='replace') as f:
            return parse(f.read())
    except OSError as exc:
        LOG.info('cannot read %s (%s): CPU model unknown', path,
                 exc.strerror or exc)
        return dict(UNKNOWN)
