"""ClaimManager over a real SQLite file: claims, bad input, audit, rebuild."""

import datetime
import logging
import os
import sqlite3
import stat

import pytest

from node_agent import exception
from node_agent.hardware import snapshot as snap
from node_agent.tracker import factory
from tests.fixtures.allocations import placement_allocations
from tests.unit.claims import host

C1 = 'aaaaaaaa-0000-4000-8000-000000000001'
C2 = 'bbbbbbbb-0000-4000-8000-000000000002'
C3 = 'cccccccc-0000-4000-8000-000000000003'


@pytest.fixture
def mgr(conf):
    return factory.claim_manager(conf)


def dump(path):
    """Everything in the database, to show nothing was written."""
    conn = sqlite3.connect(path)
    try:
        return [list(conn.iterdump())]
    finally:
        conn.close()


def test_new_database_is_wal_versioned_and_flagged_for_rebuild(conf, mgr):
    path = os.path.join(conf.state_path, 'claim.sqlite')
    assert mgr.store.path == path
    # Built, not opened: nothing on disk before the first use.
    assert not os.path.exists(path)
    assert mgr.needs_rebuild
    conn = sqlite3.connect(path)
    assert conn.execute('PRAGMA journal_mode').fetchone()[0] == 'wal'
    assert conn.execute('SELECT table_name, version FROM claim_versions'
                        ).fetchall() == [('claims', 3)]
    conn.close()
    # The flag is in the file: another process that opens it next (the
    # agent after an operator command made the file) still rebuilds.
    assert factory.claim_manager(conf).needs_rebuild
    mgr.rebuild([], {}, tree=host.tree())
    assert not mgr.needs_rebuild
    assert not factory.claim_manager(conf).needs_rebuild


def test_claim_confirm_list_show_release(mgr):
    tree, snapshot = host.tree(), host.snapshot()
    claim = mgr.claim(C1, host.alloc((host.ROOT, 'VCPU', 2),
                                     (host.PF0_RP, 'SRIOV_NET_VF', 1)),
                      tree=tree, snapshot=snapshot)
    assert claim.state == 'pending'
    assert claim.host == host.HOST and claim.node == host.HOST
    assert claim.resources == {host.ROOT: {'VCPU': 2},
                               host.PF0_RP: {'SRIOV_NET_VF': 1}}
    assert [d.address for d in claim.devices] == ['0000:5e:02.0']
    datetime.datetime.fromisoformat(claim.created_at)

    assert mgr.confirm(claim.id).state == 'active'
    assert mgr.show(claim.id).state == 'active'
    assert [c.id for c in mgr.list(consumer_uuid=C1)] == [claim.id]
    assert mgr.list(state='pending') == []

    # The same request again is the same claim (a retried RPC).
    assert mgr.claim(C1, host.alloc((host.ROOT, 'VCPU', 2),
                                    (host.PF0_RP, 'SRIOV_NET_VF', 1)),
                     tree=tree, snapshot=snapshot).id == claim.id
    with pytest.raises(exception.ClaimRejected, match='already holds'):
        mgr.claim(C1, host.alloc((host.ROOT, 'VCPU', 4)), tree=tree)
    # A resize target of the same consumer is a second claim with its own
    # devices.
    target = mgr.claim(C1, host.alloc((host.PF0_RP, 'SRIOV_NET_VF', 1)),
                       tree=tree, snapshot=snapshot, kind='resize_target')
    assert [d.address for d in target.devices] == ['0000:5e:02.1']

    assert [c.id for c in mgr.release(claim.id)] == [claim.id]
    with pytest.raises(exception.ClaimNotFound):
        mgr.show(claim.id)
    with pytest.raises(exception.ClaimNotFound):
        mgr.release(claim.id)
    assert [c.id for c in mgr.release(C1)] == [target.id]
    assert mgr.release(C1) == []


def test_claims_survive_a_restart(conf, mgr):
    claim = mgr.claim(C1, host.alloc((host.VGPU0_RP, 'VGPU', 1)),
                      tree=host.tree(), snapshot=host.snapshot())
    again = factory.claim_manager(conf)
    assert again.show(claim.id) == claim


U = host.ROOT
BAD = [
    ('consumer_uuid', 'not-a-uuid', host.alloc((U, 'VCPU', 1)), 'instance'),
    (f'allocation.{C3}', C1, host.alloc((C3, 'VCPU', 1)), 'instance'),
    ('allocation.nope', C1, {'nope': {'resources': {'VCPU': 1}}},
     'instance'),
    (f'allocation.{U}.resources.VCPU', C1, host.alloc((U, 'VCPU', -1)),
     'instance'),
    (f'allocation.{U}.resources.VCPU', C1, host.alloc((U, 'VCPU', 1.5)),
     'instance'),
    (f'allocation.{U}.resources.VCPU', C1, host.alloc((U, 'VCPU', '2')),
     'instance'),
    (f'allocation.{U}.resources.CUSTOM_GONE', C1,
     host.alloc((U, 'CUSTOM_GONE', 1)), 'instance'),
    ('kind', C1, host.alloc((U, 'VCPU', 1)), 'evacuee'),
    # Oversize: the request as a whole is measured.
    ('payload', C1,
     {f'{i:08x}-0000-4000-8000-000000000000': {'resources': {'VCPU': 1}}
      for i in range(3000)}, 'instance'),
]


@pytest.mark.parametrize('field, consumer, allocation, kind', BAD,
                         ids=[b[0].split('.')[-1] + '-' + str(i)
                              for i, b in enumerate(BAD)])
def test_bad_input_names_the_field_and_writes_nothing(
        mgr, field, consumer, allocation, kind):
    tree = host.tree()
    mgr.claim(C2, host.alloc((U, 'VCPU', 1)), tree=tree)
    before = dump(mgr.store.path)
    with pytest.raises(exception.InvalidClaimRequest) as err:
        mgr.claim(consumer, allocation, tree=tree, snapshot=host.snapshot(),
                  kind=kind)
    assert err.value.field == field
    assert field in str(err.value)
    assert dump(mgr.store.path) == before


def test_rejected_claim_writes_nothing(mgr):
    tree = host.tree()
    mgr.claim(C2, host.alloc((host.PGPU1_RP, 'PGPU', 1)), tree=tree,
              snapshot=host.snapshot())
    before = dump(mgr.store.path)
    with pytest.raises(exception.ClaimRejected):
        # The VCPU fits; the PGPU does not: neither is written.
        mgr.claim(C1, host.alloc((U, 'VCPU', 1),
                                 (host.PGPU1_RP, 'PGPU', 1)),
                  tree=tree, snapshot=host.snapshot())
    assert dump(mgr.store.path) == before


def test_gc_releases_orphans_after_expiry_only(conf, mgr):
    tree = host.tree()
    old = mgr.claim(C1, host.alloc((U, 'VCPU', 1)), tree=tree)
    running = mgr.claim(C2, host.alloc((U, 'VCPU', 1)), tree=tree)
    created = datetime.datetime.fromisoformat(old.created_at)
    domains = [snap.Domain(C2, 'guest', 'running')]

    assert mgr.gc(domains, now=created + datetime.timedelta(seconds=299)
                  ) == []
    released = mgr.gc(domains, now=created + datetime.timedelta(seconds=301))
    assert [c.id for c in released] == [old.id]
    assert [c.id for c in mgr.list()] == [running.id]


def test_startup_gc_releases_active_claims_of_vanished_guests(mgr):
    tree = host.tree()
    gone = mgr.claim(C1, host.alloc((U, 'VCPU', 1)), tree=tree)
    mgr.confirm(gone.id)
    building = mgr.claim(C2, host.alloc((U, 'VCPU', 1)), tree=tree)
    assert mgr.gc([], startup=False) == []
    assert [c.id for c in mgr.gc([], startup=True)] == [gone.id]
    assert [c.id for c in mgr.list()] == [building.id]


def test_audit_confirms_claims_whose_guest_is_seen(mgr):
    claim = mgr.claim(C1, host.alloc((U, 'VCPU', 1)), tree=host.tree())
    confirmed, released = mgr.audit([snap.Domain(C1, 'g', 'running')])
    assert [c.id for c in confirmed] == [claim.id]
    assert released == []
    assert mgr.show(claim.id).state == 'active'


def test_rebuild_from_domains_and_allocations(mgr):
    tree = host.tree()
    mdev = 'eeeeeeee-0000-4000-8000-000000000005'
    domain = snap.Domain(C1, 'guest', 'running',
                         hostdevs=('0000:d8:02.3',), mdevs=(mdev,))
    snapshot = host.snapshot([domain], existing_mdevs=[mdev])
    allocations = placement_allocations(**{
        C1: host.alloc((U, 'VCPU', 2), (host.PF1_RP, 'SRIOV_NET_VF', 1),
                       (host.VGPU0_RP, 'VGPU', 1),
                       # Another host's provider: not ours, not claimed.
                       ('dddddddd-0000-4000-8000-00000000000d', 'DISK_GB',
                        10)),
        C2: host.alloc((U, 'VCPU', 1)),
    })
    created = mgr.rebuild([domain], allocations, tree=tree,
                          snapshot=snapshot)
    by_consumer = {c.consumer_uuid: c for c in created}
    guest = by_consumer[C1]
    assert guest.state == 'active'
    assert guest.resources == {U: {'VCPU': 2},
                               host.PF1_RP: {'SRIOV_NET_VF': 1},
                               host.VGPU0_RP: {'VGPU': 1}}
    assert {(d.resource_class, d.key, d.provider) for d in guest.devices} == {
        ('SRIOV_NET_VF', '0000:d8:02.3', host.PF1_RP),
        ('VGPU', mdev, host.VGPU0_RP)}
    assert by_consumer[C2].state == 'pending'
    assert not mgr.needs_rebuild
    # Rebuilding again adds nothing; the rebuilt devices are held.
    assert mgr.rebuild([domain], allocations, tree=tree) == []
    new = mgr.claim(C3, host.alloc((host.PF1_RP, 'SRIOV_NET_VF', 3)),
                    tree=tree, snapshot=snapshot)
    assert '0000:d8:02.3' not in {d.address for d in new.devices}


def test_unclaimed_allocations_are_reported(mgr, caplog):
    mgr.claim(C1, host.alloc((U, 'VCPU', 1)), tree=host.tree())
    allocations = placement_allocations(**{
        C1: host.alloc((U, 'VCPU', 1)),
        C2: host.alloc((U, 'VCPU', 1)),
        C3: host.alloc((U, 'VCPU', 1)),
    })
    with caplog.at_level(logging.WARNING):
        unclaimed = mgr.unclaimed_allocations(
            allocations, [snap.Domain(C3, 'g', 'running')])
    assert unclaimed == {C2: {U: {'VCPU': 1}}}
    assert C2 in caplog.text and 'heal_allocations' in caplog.text


def test_corrupt_database_is_moved_aside_and_rebuilt(conf, caplog):
    path = os.path.join(conf.state_path, 'claim.sqlite')
    first = factory.claim_manager(conf)
    first.claim(C1, host.alloc((U, 'VCPU', 1)), tree=host.tree())
    with open(path, 'r+b') as f:
        f.write(b'this is not an SQLite header, nor a database' * 20)
    with open(path, 'rb') as f:
        garbage = f.read()

    with caplog.at_level(logging.CRITICAL):
        mgr = factory.claim_manager(conf)
    assert mgr.needs_rebuild
    aside = [n for n in os.listdir(conf.state_path)
             if n.startswith('claim.sqlite.corrupt-')
             and not n.endswith(('-wal', '-shm'))]
    assert len(aside) == 1
    # Moved, never emptied: the bad bytes are kept for a post-mortem.
    with open(os.path.join(conf.state_path, aside[0]), 'rb') as f:
        assert f.read() == garbage
    assert any(r.levelno == logging.CRITICAL and aside[0] in r.getMessage()
               for r in caplog.records)
    assert mgr.list() == []
    caplog.clear()
    with caplog.at_level(logging.CRITICAL):
        mgr.rebuild([], placement_allocations(
            **{C1: host.alloc((U, 'VCPU', 1))}), tree=host.tree())
    assert [c.consumer_uuid for c in mgr.list()] == [C1]
    # Nothing of the old file could be read: whatever it held beyond what
    # came back may be lost, and that is said.
    assert [r.getMessage() for r in caplog.records] == [
        'The claims of the corrupt claim database moved aside could not be '
        'read: any claim whose guest had not started and whose consumer '
        f'holds no allocation here is lost (rebuilt: {C1})']
    # Said once: the next rebuild has nothing to say.
    caplog.clear()
    with caplog.at_level(logging.CRITICAL):
        mgr.rebuild([], {}, tree=host.tree())
    assert caplog.records == []


def test_claim_with_bad_json_moves_the_file_aside(conf, caplog):
    first = factory.claim_manager(conf)
    claim = first.claim(C1, host.alloc((U, 'VCPU', 1)), tree=host.tree())
    first.rebuild([], {}, tree=host.tree())
    conn = sqlite3.connect(first.store.path)
    conn.execute("UPDATE claims SET devices = '[{\"resource_' WHERE id = ?",
                 (claim.id,))
    conn.commit()
    conn.close()

    mgr = factory.claim_manager(conf)
    with caplog.at_level(logging.CRITICAL):
        assert mgr.list() == []
    assert mgr.needs_rebuild
    moved = os.path.basename(mgr.store.moved_aside)
    assert moved.startswith('claim.sqlite.corrupt-')
    [record] = [r for r in caplog.records if r.levelno == logging.CRITICAL]
    assert record.getMessage().startswith(
        f'Claim database {mgr.store.path} is corrupt (claim {claim.id}: '
        'JSONDecodeError: ')
    assert moved in record.getMessage()
    # The bad row is still there, in the file moved aside.
    conn = sqlite3.connect(mgr.store.moved_aside)
    assert conn.execute('SELECT consumer_uuid FROM claims').fetchall() == [
        (C1,)]
    conn.close()


def test_files_are_0640_in_a_0750_directory_whatever_the_umask(conf):
    conf.set_override('state_path', os.path.join(conf.state_path, 'new'))
    old = os.umask(0)
    try:
        mgr = factory.claim_manager(conf)
        mgr.claim(C1, host.alloc((U, 'VCPU', 1)), tree=host.tree())
        with mgr.store.reader() as txn:     # its -wal and -shm are there
            assert len(txn.claims()) == 1
            modes = {n: stat.S_IMODE(os.stat(os.path.join(
                conf.state_path, n)).st_mode)
                for n in os.listdir(conf.state_path)}
    finally:
        os.umask(old)
    assert stat.S_IMODE(os.stat(conf.state_path).st_mode) == 0o750
    assert modes == {'claim.sqlite': 0o640, 'claim.sqlite-shm': 0o640,
                     'claim.sqlite-wal': 0o640}


@pytest.mark.parametrize('claim_id', [2 ** 63, 2 ** 70, 0, -1, True])
def test_claim_ids_are_bounded(mgr, claim_id):
    mgr.claim(C1, host.alloc((U, 'VCPU', 1)), tree=host.tree())
    for call in (mgr.show, mgr.confirm, mgr.release):
        with pytest.raises(exception.InvalidClaimRequest) as err:
            call(claim_id)
        assert err.value.field == 'claim_id'
        assert err.value.reason == (
            'must be an integer from 1 to 9223372036854775807')
    assert [c.consumer_uuid for c in mgr.list()] == [C1]


def test_database_newer_than_the_code_is_refused(conf, mgr):
    assert mgr.list() == []
    conn = sqlite3.connect(mgr.store.path)
    conn.execute('UPDATE claim_versions SET version = 99')
    conn.commit()
    conn.close()
    with pytest.raises(exception.StateTooNew,
                       match=f'{mgr.store.path} is at schema version 99, '
                             r'newer than this agent knows \(3\)'):
        factory.claim_manager(conf).list()
    # Refused, not moved aside.
    assert os.path.exists(mgr.store.path)
    assert not [n for n in os.listdir(conf.state_path) if 'corrupt' in n]
