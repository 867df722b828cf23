#!/usr/bin/env bash
# What tools/gpu-check.sh installs on a GPU machine that has no package
# index, built beforehand here, where one answers (doc/development.md,
# "A real NVIDIA GPU"):
#
#   bash tools/gpu-check-wheels.sh [DIR]        # DIR: tools/wheels
#
# DIR (ignored by git: wheels are never committed) then holds
# - the wheels of the agent's requirements and of its embedded Placement
#   (setup.cfg's install_requires and [embedded]), with setuptools and
#   wheel to build the agent itself, for the GPU machine's Python
#   ($PY_VERSION, default 3.12) on manylinux x86-64 (pip download);
# - libvirt-python's wheel, which PyPI has only as source: built here by
#   $PYTHON_FOR_BUILD (default python$PY_VERSION; pyenv users:
#   PYENV_VERSION=3.12.1) against this machine's libvirt (libvirt-dev and
#   pkg-config, which tools/setup.sh installs);
# - libvirt-libs.tar.gz: the shared libraries that wheel needs, the C
#   library's aside; tools/gpu-check.sh unpacks only those the GPU machine
#   lacks (ldconfig -p).
set -euo pipefail
cd "$(dirname "$0")/.."

DIR=${1:-tools/wheels}
PY_VERSION=${PY_VERSION:-3.12}
BUILD_PY=${PYTHON_FOR_BUILD:-python$PY_VERSION}
mkdir -p "$DIR"

REQS=$(mktemp)
trap 'rm -f "$REQS"' EXIT
python3 - "$REQS" <<'EOF'
import configparser
import sys

setup = configparser.ConfigParser()
setup.read('setup.cfg')
wanted = ['setuptools', 'wheel']
for section, key in (('options', 'install_requires'),
                     ('options.extras_require', 'embedded')):
    for line in setup[section][key].splitlines():
        line = line.split('#')[0].strip()
        if line and not line.startswith('libvirt-python'):
            wanted.append(line)
with open(sys.argv[1], 'w') as f:
    f.write('\n'.join(wanted) + '\n')
EOF

echo "downloading wheels for CPython $PY_VERSION, manylinux x86-64, into $DIR"
python3 -m pip download -q --only-binary=:all: \
    --python-version "$PY_VERSION" --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 \
    --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
    --platform manylinux1_x86_64 -d "$DIR" -r "$REQS"

echo "building libvirt-python with $BUILD_PY"
"$BUILD_PY" -m pip wheel -q --no-deps -w "$DIR" libvirt-python

# The libraries libvirtmod links to, from this machine, as they are
# found here (one archive: the GPU machine takes what it lacks), but for
# the C and C++ runtimes, which every machine has in a version of its own.
SO=$(cd "$(mktemp -d)" && unzip -q "$OLDPWD/$DIR"/libvirt_python-*.whl \
    'libvirtmod.*.so' && echo "$PWD"/libvirtmod.*.so)
LIBS=$(mktemp -d)
ldd "$SO" | awk '$3 ~ /^\// {print $3}' \
    | grep -vE '/(libc|libm|libpthread|libdl|librt|libresolv|libstdc\+\+|libgcc_s|ld-linux-x86-64)\.so' \
    | xargs -I{} cp -L {} "$LIBS"/
tar -czf "$DIR/libvirt-libs.tar.gz" -C "$LIBS" .
rm -rf "$LIBS" "$(dirname "$SO")"
du -sh "$DIR"
