"""Hardware discovery: read the host, return one frozen HostSnapshot.

Read-only collectors, each with an injectable source, merged by
:mod:`node_agent.hardware.discovery`:

* :mod:`sysfs` - the only reader of sysfs (root ``[hardware] sysfs_root``);
  :mod:`topology`, :mod:`pci` and :mod:`net` parse what it reads;
* :mod:`libvirt_host` - capabilities, node devices, domains
  (``[libvirt] connection_uri``); :mod:`cpuinfo` - this machine's CPU
  model where libvirt's test driver invents one;
* :mod:`nvml` - NVIDIA GPUs through an injected ``pynvml`` module;
* :mod:`udev` - events that should trigger an early re-scan;
* :mod:`domain_events` - libvirt guests that came, stopped or went;
* :mod:`holders` - which guests hold a PCI device: the one rule every
  caller (one-time-use cleans, claims, drivers) asks.

Nothing here knows about Placement.
"""
