#!/usr/bin/env bash
# Install node-agent as a system service on this host, from this tree:
#
#   /opt/node-agent/                  the package in its own virtualenv
#   /usr/bin/node-agent, /usr/bin/node-agent-manage, /usr/bin/node-agent-api
#                                     symlinks to the virtualenv's commands
#   /etc/systemd/system/node-agent.service
#                                     the unit (ExecStart=/usr/bin/node-agent)
#   /etc/systemd/system/node-agent-layout.service
#                                     the declared GPU layout restored at
#                                     boot (doc/gpus.md), pulled in by
#                                     node-agent.service
#   /etc/systemd/system/node-agent-api.service
#                                     the accelerator API's unit, not
#                                     enabled (doc/accelerators.md)
#   /etc/udev/rules.d/70-node-agent-vgpu.rules
#                                     a vendor-VFIO VF's vGPU type file
#                                     writable by group node-agent (the
#                                     agent writes it at bind)
#   /etc/node-agent/node-agent.conf   from the sample, never overwritten
#   /etc/node-agent/provider_config/  provider override files
#   /var/lib/node-agent/              state (claims, sync state)
#   /usr/share/doc/node-agent/        README.md, the guides (doc/) and the
#                                     sample config
#   user and group node-agent         in group libvirt when it exists, and
#                                     in nova's group when nova's files
#                                     are readable by their group only
#
# The agent alone: a hypervisor talks to the cloud's Placement.
# --embedded adds the embedded Placement (node-agent[embedded]:
# openstack-placement, wsgi-intercept), for [placement] embedded = true
# and node-agent-manage placement migrate-inventory.
#
# Running it again upgrades the virtualenv in place and keeps the
# configuration.  --uninstall removes the virtualenv, the unit, the symlinks
# and the documentation, and keeps /etc/node-agent, /var/lib/node-agent and
# the user.
#
# --root DIR installs into DIR as if it were / (DESTDIR-style, to check
# what an install does): no systemctl, and the user and group are added to
# DIR/etc/passwd and DIR/etc/group (useradd --prefix) when those files exist
# and this runs as root; otherwise the script says what it would do.  The
# virtualenv's scripts then name DIR in their interpreter line.
#
# Arguments after "--" go to pip, e.g. "-- --no-index --find-links
# /srv/wheels" on a host without access to PyPI.
set -euo pipefail

usage() {
    cat <<EOF
usage: $0 [--prefix DIR] [--python PYTHON] [--root DIR] [--embedded]
          [-- PIP_ARGS...]
       $0 --uninstall [--prefix DIR] [--root DIR]

  --embedded       also the embedded Placement (node-agent[embedded]), for
                   [placement] embedded = true and placement
                   migrate-inventory
  --prefix DIR     virtualenv location (default /opt/node-agent)
  --python PYTHON  interpreter the virtualenv is made from (default python3)
  --root DIR       install into DIR as if it were /
  --uninstall      remove what the install put there, keep config and state
EOF
}

ROOT=""
PREFIX=/opt/node-agent
PYTHON=python3
ACTION=install
EXTRAS=""
PIP_ARGS=()
while [ $# -gt 0 ]; do
    case "$1" in
        --root|--prefix|--python)
            if [ $# -lt 2 ]; then usage >&2; exit 2; fi ;;
    esac
    case "$1" in
        --root) ROOT=$(realpath -m "$2"); shift 2 ;;
        --prefix) PREFIX=$(realpath -m "$2"); shift 2 ;;
        --python) PYTHON=$2; shift 2 ;;
        --uninstall) ACTION=uninstall; shift ;;
        --embedded) EXTRAS="[embedded]"; shift ;;
        -h|--help) usage; exit 0 ;;
        --) shift; PIP_ARGS=("$@"); break ;;
        *) usage >&2; exit 2 ;;
    esac
done
ROOT=${ROOT%/}

SRC=$(cd "$(dirname "$0")/.." && pwd)
ACCOUNT=node-agent
ETC=/etc/node-agent
STATE=/var/lib/node-agent
UNIT=/etc/systemd/system/node-agent.service
API_UNIT=/etc/systemd/system/node-agent-api.service
LAYOUT_UNIT=/etc/systemd/system/node-agent-layout.service
DOC=/usr/share/doc/node-agent
BINDIR=/usr/bin
COMMANDS="node-agent node-agent-manage node-agent-api"
UDEV_RULE=/etc/udev/rules.d/70-node-agent-vgpu.rules
VENV=$ROOT$PREFIX

say() { echo "install.sh: $*"; }
die() { echo "install.sh: error: $*" >&2; exit 1; }

if [ -z "$ROOT" ] && [ "$(id -u)" != 0 ]; then
    die "run as root (or with --root DIR to install into a directory)"
fi

systemd_running() { [ -z "$ROOT" ] && [ -d /run/systemd/system ]; }

# The udev rule applies to the VFs the nvidia driver binds from now on;
# those already bound get it from a trigger.
udev_reload() {
    if [ -z "$ROOT" ] && command -v udevadm >/dev/null \
            && [ -d /run/udev ]; then
        udevadm control --reload
        udevadm trigger --action=add --subsystem-match=pci \
            --attr-match=vendor=0x10de
        say "udevadm: rules reloaded, NVIDIA PCI devices triggered"
    else
        say "udev is not running here: no udevadm trigger"
    fi
}

daemon_reload() {
    if systemd_running; then
        systemctl daemon-reload
        say "systemctl daemon-reload"
    else
        say "systemd is not running here: no daemon-reload"
    fi
}

# The user database: NSS on the host, the root's own files under --root.
lookup() {  # lookup passwd|group NAME -> the entry, or nothing
    if [ -z "$ROOT" ]; then
        getent "$1" "$2" || true
    else
        grep "^$2:" "$ROOT/etc/$1" 2>/dev/null || true
    fi
}

group_name() {  # group_name GID -> the group's name, or nothing
    if [ -z "$ROOT" ]; then
        getent group "$1" | cut -d: -f1
    else
        awk -F: -v gid="$1" '$3 == gid {print $1; exit}' "$ROOT/etc/group"
    fi
}

# nova-compute's files the agent reads beside it (the defaults of [nova]
# config_file and compute_id_path): evidence that keeps it off the devices
# nova-compute reports.  Readable by their group only (nova.conf is 0640
# root:nova on most distributions), they need the agent in that group.
NOVA_FILES=(/etc/nova/nova.conf /var/lib/nova/compute_id)

nova_groups() {  # the groups that give read access to nova's files
    local file mode gid group
    for file in "${NOVA_FILES[@]}"; do
        [ -f "$ROOT$file" ] || continue
        read -r mode gid < <(stat -c '%a %g' "$ROOT$file")
        (( (8#$mode & 8#004) == 0 && (8#$mode & 8#040) != 0 )) || continue
        group=$(group_name "$gid")
        if [ -z "$group" ] || [ "$group" = root ]; then
            say "warning: $file is readable by group ${group:-$gid} only:" \
                "not adding $ACCOUNT to it; the agent reports that it" \
                "cannot read it (status line, metric)" >&2
            continue
        fi
        echo "$group $file"
    done
}

# Adds the user and group; prints "uid gid", or nothing when skipped.
accounts() {
    local prefix=()
    if [ -n "$ROOT" ]; then
        if [ "$(id -u)" != 0 ] || [ ! -f "$ROOT/etc/passwd" ] \
                || [ ! -f "$ROOT/etc/group" ]; then
            say "skipped under --root (no $ROOT/etc/passwd or not root):" \
                "system user and group $ACCOUNT, home $STATE," \
                "in group libvirt if it exists and in the group of" \
                "nova's files (${NOVA_FILES[*]}) when only it reads" \
                "them" >&2
            return 0
        fi
        prefix=(--prefix "$ROOT")
    fi
    if [ -z "$(lookup group $ACCOUNT)" ]; then
        groupadd "${prefix[@]}" --system "$ACCOUNT"
        say "added group $ACCOUNT" >&2
    fi
    if [ -z "$(lookup passwd $ACCOUNT)" ]; then
        useradd "${prefix[@]}" --system --gid "$ACCOUNT" \
            --home-dir "$STATE" --no-create-home \
            --shell /usr/sbin/nologin --comment node-agent "$ACCOUNT"
        say "added user $ACCOUNT" >&2
    fi
    # The agent opens libvirt read-only; the group covers hosts whose
    # read-only socket is not open to every local user.
    if [ -n "$(lookup group libvirt)" ]; then
        usermod "${prefix[@]}" --append --groups libvirt "$ACCOUNT"
        say "user $ACCOUNT is in group libvirt" >&2
    fi
    local group file
    while read -r group file; do
        usermod "${prefix[@]}" --append --groups "$group" "$ACCOUNT"
        say "user $ACCOUNT is in group $group (to read $file)" >&2
    done < <(nova_groups)
    lookup passwd "$ACCOUNT" | awk -F: '{print $3, $4}'
}

install_venv() {
    if [ -x "$VENV/bin/python" ] && "$VENV/bin/python" -c '' 2>/dev/null
    then
        say "upgrading the virtualenv in $PREFIX in place"
    elif [ -f "$VENV/pyvenv.cfg" ]; then
        say "rebuilding the virtualenv in $PREFIX (its Python is gone)"
        "$PYTHON" -m venv --clear "$VENV"
    elif [ -e "$VENV" ] && [ -n "$(ls -A "$VENV")" ]; then
        die "$PREFIX exists and is not a virtualenv: not touching it"
    else
        say "creating a virtualenv in $PREFIX"
        "$PYTHON" -m venv "$VENV"
    fi
    # Build from a copy of the package's sources: the tree stays untouched
    # and no stale build/ directory leaks into the installed package.
    local stage
    stage=$(mktemp -d)
    tar -C "$SRC" --exclude=__pycache__ -cf - \
        setup.py setup.cfg README.md node_agent | tar -C "$stage" -xf -
    if [ -n "$EXTRAS" ]; then
        say "with the embedded Placement (node-agent$EXTRAS)"
    fi
    "$VENV/bin/python" -m pip install --disable-pip-version-check \
        --upgrade "${PIP_ARGS[@]}" "$stage$EXTRAS" \
        || { rm -rf "$stage"; die "pip could not install node-agent"; }
    rm -rf "$stage"
}

do_install() {
    local ids uid="" gid="" own=() state_own=()
    ids=$(accounts)
    if [ -n "$ids" ]; then
        read -r uid gid <<<"$ids"
        own=(-o 0 -g "$gid")
        state_own=(-o "$uid" -g "$gid")
    fi

    install_venv

    install -d "$ROOT$BINDIR"
    for c in $COMMANDS; do
        if [ -e "$ROOT$BINDIR/$c" ] && [ ! -L "$ROOT$BINDIR/$c" ]; then
            die "$BINDIR/$c exists and is not a symlink: not replacing it"
        fi
        ln -sfn "$PREFIX/bin/$c" "$ROOT$BINDIR/$c"
    done

    install -d -m 0750 "${own[@]}" "$ROOT$ETC" "$ROOT$ETC/provider_config"
    if [ -e "$ROOT$ETC/node-agent.conf" ]; then
        say "kept $ETC/node-agent.conf"
    else
        install -m 0640 "${own[@]}" \
            "$SRC/etc/node-agent/node-agent.conf.sample" \
            "$ROOT$ETC/node-agent.conf"
        say "wrote $ETC/node-agent.conf from the sample: edit it"
    fi
    install -d -m 0750 "${state_own[@]}" "$ROOT$STATE"
    install -D -m 0644 "$SRC/systemd/70-node-agent-vgpu.rules" \
        "$ROOT$UDEV_RULE"
    udev_reload

    install -d "$ROOT$DOC" "$ROOT$DOC/doc"
    install -m 0644 "$SRC/README.md" \
        "$SRC/etc/node-agent/node-agent.conf.sample" "$ROOT$DOC/"
    install -m 0644 "$SRC"/doc/*.md "$ROOT$DOC/doc/"
    install -D -m 0644 "$SRC/systemd/node-agent.service" "$ROOT$UNIT"
    install -D -m 0644 "$SRC/systemd/node-agent-api.service" "$ROOT$API_UNIT"
    install -D -m 0644 "$SRC/systemd/node-agent-layout.service" \
        "$ROOT$LAYOUT_UNIT"
    daemon_reload

    say "installed node-agent" \
        "$("$VENV/bin/python" -c \
            'from importlib import metadata; print(metadata.version("node-agent"))')" \
        "in $PREFIX"
    say "next: edit $ETC/node-agent.conf, then" \
        "systemctl enable --now node-agent (or restart it after an upgrade)"
}

do_uninstall() {
    if [ -e "$VENV" ] && [ ! -f "$VENV/pyvenv.cfg" ]; then
        die "$PREFIX is not a virtualenv: not removing it"
    fi
    if systemd_running; then
        systemctl disable --now node-agent.service 2>/dev/null || true
        systemctl disable --now node-agent-api.service 2>/dev/null || true
        systemctl disable node-agent-layout.service 2>/dev/null || true
    fi
    rm -f "$ROOT$UNIT" "$ROOT$API_UNIT" "$ROOT$LAYOUT_UNIT"
    for c in $COMMANDS; do
        if [ -L "$ROOT$BINDIR/$c" ]; then rm -f "$ROOT$BINDIR/$c"; fi
    done
    rm -rf "$ROOT$DOC"
    rm -f "$ROOT$UDEV_RULE"
    rm -rf "$VENV"
    daemon_reload
    say "removed node-agent; kept $ETC, $STATE and the user $ACCOUNT"
}

"do_$ACTION"
