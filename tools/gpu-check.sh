#!/usr/bin/env bash
# The live NVIDIA GPU check (doc/development.md, "A real NVIDIA GPU"):
# the agent's discovery with the real NVML and /sys and the trees it
# builds, every NVML query of its health source once with an event wait,
# the differences from the recorded H100 (tests/fixtures/hosts/h100-vm),
# and a fresh recording in the same format.  Read only: it never calls
# an NVML setter and changes no GPU setting.
#
#   bash tools/gpu-check.sh [OUT_DIR] [--event-wait SECONDS] [...]
#
# OUT_DIR (default: $OUT, else a new temporary directory) receives
# gpu-check.log, report.json and recording.tar.gz; further arguments go
# to `python -m tools.gpu_check` (--help lists them).
#
#   bash tools/gpu-check.sh OUT_DIR --layout-config /etc/node-agent/node-agent.conf
#
# compares the GPU layout that file's [gpu_layout:...] sections declare
# with the live GPUs', read only: the plan `node-agent-manage layout
# apply --dry-run` makes, against the check's scan (what holds, each step
# an apply would take, each it would refuse and why), in gpu-check.log
# and report.json ("layout").  It writes no sysfs file and calls no NVML
# setter; layout changes are tested on the recorded hosts only.  Without
# the option it says so in one line and skips it.
#
# Python: the repository's .venv when it has what the check needs, else
# $GPU_CHECK_PYTHON (default python3) with the wheels in tools/wheels/ (or
# $GPU_CHECK_WHEELS) installed offline into a temporary directory, and
# the shared libraries of libvirt-libs.tar.gz there that this machine
# lacks on LD_LIBRARY_PATH: tools/gpu-check-wheels.sh builds them
# beforehand on a machine with a package index.  The whole run takes at
# most 5 minutes: 90 s to install, 190 s to check.
#
# No NVIDIA GPU on the PCI bus ($GPU_CHECK_SYSFS_ROOT, default /sys)
# and, with the machine's own /sys, no NVIDIA device node either:
# "no NVIDIA GPU: nothing to check", exit 0.  What it cannot do it says,
# and why; it exits non-zero only when the agent itself failed (1) or
# the check outran its time (124).
set -uo pipefail
cd "$(dirname "$0")/.."

SYSFS=${GPU_CHECK_SYSFS_ROOT:-/sys}
WHEELS=${GPU_CHECK_WHEELS:-tools/wheels}
OUT_DIR=${OUT:-}
if [ $# -gt 0 ] && [ "${1#-}" = "$1" ]; then
    OUT_DIR=$1
    shift
fi
[ -n "$OUT_DIR" ] || OUT_DIR=$(mktemp -d /tmp/gpu-check-out.XXXXXX)
mkdir -p "$OUT_DIR"

# The same test as the check's own (tools/gpu_check: nvidia_gpus), made
# before anything is installed: an NVIDIA display function, not a VF.
has_nvidia_gpu() {
    local device
    for device in "$SYSFS"/bus/pci/devices/*; do
        [ "$(cat "$device/vendor" 2>/dev/null)" = 0x10de ] || continue
        case "$(cat "$device/class" 2>/dev/null)" in
            0x03*) ;;
            *) continue ;;
        esac
        [ -e "$device/physfn" ] || return 0
    done
    return 1
}

# A sandboxed /sys (gVisor) may list no PCI device while the GPU is
# there: its device nodes say so (only when /sys is the machine's own).
has_nvidia_device() {
    [ -z "${GPU_CHECK_SYSFS_ROOT:-}" ] || return 1
    compgen -G '/dev/nvidia[0-9]*' >/dev/null \
        || compgen -G '/proc/driver/nvidia/gpus/*' >/dev/null
}

if ! has_nvidia_gpu && ! has_nvidia_device; then
    echo "no NVIDIA GPU: nothing to check"
    exit 0
fi

# From here on every line goes to gpu-check.log too.
say() {
    echo "$*" | tee -a "$OUT_DIR/gpu-check.log"
}

# The libraries of libvirt-python's wheel this machine lacks, from the
# archive tools/gpu-check-wheels.sh made.
unpack_missing_libraries() {
    local archive=$1 name missing=()
    for name in $(tar -tzf "$archive"); do
        name=${name#./}
        [ -n "$name" ] || continue
        ldconfig -p 2>/dev/null | grep -q "^[[:space:]]$name " \
            || [ -e "/lib/x86_64-linux-gnu/$name" ] \
            || [ -e "/usr/lib/x86_64-linux-gnu/$name" ] \
            || missing+=("./$name")
    done
    [ ${#missing[@]} -gt 0 ] || return 0
    LIBS=$(mktemp -d /tmp/gpu-check-lib.XXXXXX)
    tar -xzf "$archive" -C "$LIBS" "${missing[@]}"
    say "libraries this machine lacks, from $archive: ${missing[*]#./}"
    export LD_LIBRARY_PATH=$LIBS${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
}

NEEDS='import node_agent, placement, libvirt, pynvml'
PY=${GPU_CHECK_PYTHON:-}
if [ -z "$PY" ] && .venv/bin/python -c "$NEEDS" 2>/dev/null; then
    PY=.venv/bin/python
else
    PY=${PY:-python3}
    if ! ls "$WHEELS"/*.whl >/dev/null 2>&1; then
        say "COULD NOT run the check: no virtualenv with the agent here" \
            "and $WHEELS holds no wheels; build them with" \
            "'bash tools/gpu-check-wheels.sh' on a machine with a package" \
            "index (doc/development.md)"
        exit 0
    fi
    SITE=$(mktemp -d /tmp/gpu-check-site.XXXXXX)
    say "installing the agent from $WHEELS into $SITE (offline)"
    if ! PIP_ROOT_USER_ACTION=ignore timeout 90 "$PY" -m pip install -q \
            --no-index --no-cache-dir --no-compile --find-links "$WHEELS" \
            --target "$SITE" '.[embedded]'; then
        say "COULD NOT run the check: installing from $WHEELS failed" \
            "(above); rebuild the wheels for this machine's $("$PY" -V)"
        exit 0
    fi
    export PYTHONPATH=$SITE
    if [ -f "$WHEELS/libvirt-libs.tar.gz" ]; then
        unpack_missing_libraries "$WHEELS/libvirt-libs.tar.gz"
    fi
fi

PYTHONUNBUFFERED=1 timeout 190 "$PY" -m tools.gpu_check "$OUT_DIR" \
    --sysfs-root "$SYSFS" "$@" 2>&1 | tee -a "$OUT_DIR/gpu-check.log"
status=${PIPESTATUS[0]}
if [ "$status" = 124 ]; then
    say "the check did not finish within 190 s: the last lines above" \
        "say where it was"
fi
exit "$status"
