"""A round's value, its status line and what the daemon makes of it
(pure: no Placement, no host)."""

import dataclasses

import pytest

from node_agent import exception
from node_agent import provider_tree as ptree
from node_agent.tracker import exit_policy
from node_agent.tracker import round as round_mod
from node_agent.tracker import status

LIBVIRT = exception.LibvirtConnectionError('qemu:///system', 'refused')
SHARED = exception.RootShared('standalone', 'compute1', 'nova-compute',
                              ['it says so'])


def synced(**fields):
    tree = ptree.ProviderTree()
    tree.new_root('compute1', uuid='00000000-0000-0000-0000-000000000001')
    return round_mod.Round('compute1', plan=object(), tree=tree, **fields)


def test_a_round_is_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        synced().tree = None


def test_a_skipped_round_keeps_the_last_sync_and_says_why():
    last = synced()
    skipped = last.replace(plan=None,
                           problem=round_mod.Problem.of(LIBVIRT))
    assert (skipped.tree, skipped.synced, last.synced) == (
        last.tree, False, True)
    assert status.line(skipped) == (
        "waiting for libvirt: cannot connect to libvirt at "
        "'qemu:///system': refused")


NOW = ('clean due', '1 device drained')     # one-time-use, health


@pytest.mark.parametrize('last, now, line', [
    (synced(), ('', ''), 'in sync: 1 provider'),
    (synced(reshape_pending='layout changed'), ('', ''),
     'restart required: reshape pending'),
    (synced(problem=round_mod.Problem.of(SHARED)), ('', ''),
     'refusing to share root compute1 with nova-compute: set [DEFAULT] '
     'deployment = beside_nova_compute'),
    (synced(root_note='a note', guest_notes=('1 device held',),
            unreadable={'/etc/nova/nova.conf': 'unreadable'}), NOW,
     'in sync: 1 provider; a note; clean due; 1 device held; '
     'warning: unreadable; 1 device drained'),
    # An audit skipped: the guests' notes of the last sync are not said.
    (synced(problem=round_mod.Problem.of(exception.ScanIncomplete(
        'sysfs', 'gone')), guest_notes=('1 device held',)), NOW,
     'audit skipped: ' + str(exception.ScanIncomplete('sysfs', 'gone'))
     + '; clean due; 1 device drained'),
])
def test_the_status_line_is_a_function_of_the_round(last, now, line):
    assert status.line(last, *now) == line


@pytest.mark.parametrize('found, outcome', [
    (synced(), ('ok', exit_policy.SOLVED, None, False)),
    (synced(incomplete='x: kept'), ('ok', 'incomplete', 'x: kept', False)),
    (synced(problem=round_mod.Problem.of(LIBVIRT)),
     ('failed', exit_policy.WAITING_SINCE, 'the line', False)),
    (synced(problem=round_mod.Problem.of(SHARED)),
     ('failed', 'skipped', str(SHARED), False)),
    (exception.Stopping('GET', '/'), ('failed', None, None, False)),
    (exception.PlacementUnavailable('down', reason='503'),
     ('placement_unavailable', exit_policy.WAITING,
      'waiting for Placement: 503', True)),
    (exception.PlacementCredentialsError('no'),
     ('failed', 'failed', 'Placement refused the credentials', True)),
    (ValueError('odd'),
     ('failed', 'failed', 'unexpected error: ValueError: odd', False)),
])
def test_an_audit_outcome_comes_from_one_table(found, outcome):
    assert tuple(exit_policy.audit_outcome(found, 'the line')) == outcome


def test_the_startup_waits_name_what_they_wait_for():
    wait = exit_policy.startup_wait(LIBVIRT)
    assert (wait.what(LIBVIRT), wait.status(LIBVIRT, 'libvirt', None)) == (
        'libvirt', 'waiting for libvirt: refused')
    unsafe = exception.UnsafePlan('compute1', 'VCPU', 'below usage')
    wait = exit_policy.startup_wait(unsafe)
    assert (wait.problem, wait.status(unsafe, 'startup', 'T')) == (
        True, 'waiting since T: unsafe plan, nothing written: VCPU on '
        'compute1: below usage')
