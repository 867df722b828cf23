"""``python -m tools.gpu_check [OUT_DIR]``: the live NVIDIA GPU check.

Run from the repository root (``tools/gpu-check.sh`` does); the output
directory defaults to ``$OUT``, else a new temporary directory.
"""

import argparse
import os
import sys
import tempfile

from tools import gpu_check


def parse(argv):
    parser = argparse.ArgumentParser(
        prog='gpu-check', description=gpu_check.__doc__.split('\n')[0])
    parser.add_argument('out_dir', nargs='?',
                        default=os.environ.get('OUT') or None,
                        help='where report.json and recording.tar.gz go '
                             '(default: $OUT, else a temporary directory)')
    parser.add_argument('--sysfs-root', default='/sys',
                        help='the sysfs tree to read (default: /sys)')
    parser.add_argument('--libvirt-uri', default=None,
                        help='libvirt to read (default: the quick '
                             "start's, test:///default)")
    parser.add_argument('--event-wait', type=float, default=30.0,
                        help='seconds of the NVML event wait (default 30)')
    parser.add_argument('--reference', default=gpu_check.REFERENCE,
                        help='the recording to compare with (default: '
                             '%(default)s)')
    parser.add_argument('--name', default='gpu-host',
                        help='the recording\'s directory name in the '
                             'archive (default: %(default)s)')
    parser.add_argument('--layout-config', default=None, metavar='FILE',
                        help='a configuration file with [gpu_layout:...] '
                             'sections: the declared GPU layout compared '
                             'with this host\'s, read only (default: '
                             'skipped)')
    return parser.parse_args(argv)


def main(argv=None):
    args = parse(sys.argv[1:] if argv is None else argv)
    out_dir = args.out_dir or tempfile.mkdtemp(prefix='gpu-check-out-')
    os.makedirs(out_dir, exist_ok=True)

    def say(line):
        print(line, flush=True)

    say(f'gpu-check: output in {out_dir}')
    return gpu_check.Check(
        out_dir, sysfs_root=args.sysfs_root, libvirt_uri=args.libvirt_uri,
        event_wait=args.event_wait, reference=args.reference,
        name=args.name, say=say, logging=True,
        layout_config=args.layout_config).run()


if __name__ == '__main__':
    sys.exit(main())
