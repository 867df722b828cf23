"""The SQLite store: upgrades from a real old file, races across processes."""

import json
import multiprocessing
import os
import sqlite3

import pytest

from node_agent import exception
from node_agent.claims import store
from node_agent.cmd import manage
from node_agent.tracker import factory
from tests.unit.claims import host

# Version 1 as the first agents wrote it; written out here rather than
# taken from the code, so the test holds the code to the real old format.
V1_DDL = """
CREATE TABLE claim_versions (table_name TEXT PRIMARY KEY,
                             version INTEGER NOT NULL);
INSERT INTO claim_versions VALUES ('claims', 1);
CREATE TABLE claims (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    host TEXT NOT NULL,
    node TEXT NOT NULL,
    instance_uuid TEXT NOT NULL,
    resources TEXT NOT NULL,
    pci TEXT NOT NULL DEFAULT '[]',
    resize_target INTEGER NOT NULL DEFAULT 0,
    created_at TEXT NOT NULL);
"""
C1 = 'AAAAAAAA-0000-4000-8000-000000000001'
C2 = 'bbbbbbbb-0000-4000-8000-000000000002'


def make_v1(path):
    vf = {'resource_class': 'SRIOV_NET_VF', 'provider': host.PF0_RP,
          'parent': host.PF0, 'address': '0000:5e:02.0'}
    conn = sqlite3.connect(path)
    conn.executescript(V1_DDL)
    conn.execute(
        'INSERT INTO claims (host, node, instance_uuid, resources, pci, '
        'resize_target, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)',
        ('compute1', 'compute1', C1,
         json.dumps({host.PF0_RP: {'SRIOV_NET_VF': 1}}), json.dumps([vf]), 0,
         '2024-05-01T10:00:00+00:00'))
    conn.execute(
        'INSERT INTO claims (host, node, instance_uuid, resources, '
        'resize_target, created_at) VALUES (?, ?, ?, ?, ?, ?)',
        ('compute1', 'compute1', C2, json.dumps({host.ROOT: {'VCPU': 2}}), 1,
         '2024-05-01T11:00:00+00:00'))
    conn.commit()
    conn.close()


def test_v1_database_is_upgraded_at_startup(conf):
    path = os.path.join(conf.state_path, 'claim.sqlite')
    make_v1(path)
    mgr = factory.claim_manager(conf)
    assert not mgr.needs_rebuild
    assert mgr.store.version() == store.LATEST == 3
    first, second = mgr.list()
    assert (first.consumer_uuid, first.kind, first.state) == (
        C1.lower(), 'instance', 'pending')
    assert first.devices[0].address == '0000:5e:02.0'
    assert first.created_at == first.updated_at == '2024-05-01T10:00:00+00:00'
    assert (second.consumer_uuid, second.kind) == (C2, 'resize_target')
    # The upgraded claims count: the VF in the old claim is not handed out.
    new = mgr.claim('cccccccc-0000-4000-8000-000000000003',
                    host.alloc((host.PF0_RP, 'SRIOV_NET_VF', 1)),
                    tree=host.tree(), snapshot=host.snapshot())
    assert new.devices[0].address == '0000:5e:02.1'
    assert new.id == 3


def write_config(tmp_path, conf):
    path = tmp_path / 'node-agent.conf'
    path.write_text(f'[DEFAULT]\nstate_path = {conf.state_path}\n'
                    'host = compute1\n')
    return ['--config-file', str(path)]


def make_v2(path):
    """A version 2 file (one claim), as the agents before ARQs wrote it:
    the DDL as that release ran it."""
    conn = sqlite3.connect(path)
    conn.executescript("""
        CREATE TABLE claim_versions (table_name TEXT PRIMARY KEY,
                                     version INTEGER NOT NULL);
        INSERT INTO claim_versions VALUES ('claims', 2);
        CREATE TABLE claims (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            host TEXT NOT NULL, node TEXT NOT NULL,
            consumer_uuid TEXT NOT NULL,
            kind TEXT NOT NULL
                CHECK (kind IN ('instance', 'migration', 'resize_target')),
            resources TEXT NOT NULL, devices TEXT NOT NULL DEFAULT '[]',
            state TEXT NOT NULL CHECK (state IN ('pending', 'active')),
            created_at TEXT NOT NULL, updated_at TEXT NOT NULL);
        CREATE INDEX claims_consumer_idx ON claims (consumer_uuid);""")
    conn.execute(
        'INSERT INTO claims (host, node, consumer_uuid, kind, resources, '
        'devices, state, created_at, updated_at) '
        "VALUES ('compute1', 'compute1', ?, 'instance', ?, '[]', 'active', "
        "'2026-01-01T10:00:00+00:00', '2026-01-01T10:00:00+00:00')",
        (C2, json.dumps({host.PGPU1_RP: {'PGPU': 1}})))
    conn.commit()
    conn.close()


def test_v2_database_gains_the_arq_column(conf):
    """The claims of a version 2 file read back with no ARQ; a claim bound
    for an ARQ is found by it, and a second claim for the same ARQ is
    refused by the database itself."""
    path = os.path.join(conf.state_path, 'claim.sqlite')
    make_v2(path)
    mgr = factory.claim_manager(conf)
    assert mgr.store.version() == 3
    [old] = mgr.list()
    assert (old.consumer_uuid, old.state, old.arq_uuid) == (
        C2, 'active', None)
    arq = 'aaaaaaaa-1111-4000-8000-000000000001'
    bound = mgr.bind(arq, C1, host.alloc((host.VGPU0_RP, 'VGPU', 1)),
                     tree=host.tree(), snapshot=host.snapshot())
    assert mgr.store.get(bound.id).arq_uuid == arq
    with mgr.store.transaction() as txn:
        assert txn.by_arq(arq).id == bound.id
        with pytest.raises(sqlite3.IntegrityError):
            txn.insert(bound)


def test_manage_db_version_and_upgrade(conf, tmp_path, capsys):
    make_v1(os.path.join(conf.state_path, 'claim.sqlite'))
    args = write_config(tmp_path, conf)
    assert manage.main(args + ['db', 'version']) == 0
    assert capsys.readouterr().out.strip() == '1 (latest 3)'
    assert manage.main(args + ['db', 'upgrade']) == 0
    assert 'from version 1 to 3' in capsys.readouterr().out
    assert manage.main(args + ['db', 'version']) == 0
    assert capsys.readouterr().out.strip() == '3 (latest 3)'


def test_manage_claims_list_show_release(conf, tmp_path, capsys):
    mgr = factory.claim_manager(conf)
    claim = mgr.claim(C2, host.alloc((host.ROOT, 'VCPU', 3)),
                      tree=host.tree())
    args = write_config(tmp_path, conf)
    assert manage.main(args + ['claims', 'list', '--format', 'json']) == 0
    listed = json.loads(capsys.readouterr().out)
    assert [c['id'] for c in listed] == [claim.id]
    assert manage.main(args + ['claims', 'list']) == 0
    assert C2 in capsys.readouterr().out
    assert manage.main(args + ['claims', 'show', str(claim.id)]) == 0
    assert json.loads(capsys.readouterr().out)['resources'] == {
        host.ROOT: {'VCPU': 3}}
    assert manage.main(args + ['claims', 'release', C2]) == 0
    assert f'released claim {claim.id}' in capsys.readouterr().out
    assert manage.main(args + ['claims', 'show', str(claim.id)]) == 1
    assert 'not found' in capsys.readouterr().err


@pytest.mark.parametrize('args, message', [
    (['claims', 'show', '99999999999999999999999'],
     'argument ID: must be an integer from 1 to 9223372036854775807'),
    (['claims', 'release', str(2 ** 63)],
     'argument ID_OR_CONSUMER: must be an integer from 1 to '
     '9223372036854775807'),
])
def test_manage_claim_ids_are_bounded(conf, tmp_path, capsys, args,
                                      message):
    with pytest.raises(SystemExit) as exit_:
        manage.main(write_config(tmp_path, conf) + args)
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert message in err and 'Traceback' not in err


def test_manage_claim_amounts_are_bounded(conf, tmp_path, capsys):
    args = write_config(tmp_path, conf) + [
        'claims', 'create', C2, f'{host.ROOT}:VCPU={2 ** 70}',
        '--no-devices']
    assert manage.main(args) == 2
    assert capsys.readouterr().err == (
        'node-agent-manage: error: invalid claim request: '
        f'allocation.{host.ROOT}.resources.VCPU: must be an integer from 1 '
        'to 2147483647\n')
    assert not os.path.exists(os.path.join(conf.state_path, 'claim.sqlite'))


VFS = 16


def _claim_one_vf(path, consumer, start, results):
    # Runs in a child process: its own connections to the same file.
    from oslo_config import cfg
    from node_agent import conf as na_conf
    c = cfg.ConfigOpts()
    na_conf.register_opts(c)
    c([], default_config_files=[])
    c.set_override('host', 'compute1')
    c.set_override('state_path', os.path.dirname(path))
    mgr = factory.claim_manager(c)
    start.wait()
    try:
        claim = mgr.claim(consumer,
                          host.alloc((host.PF0_RP, 'SRIOV_NET_VF', 1)),
                          tree=host.tree(vf_total=VFS),
                          snapshot=host.snapshot(vf_count=VFS))
        results.put((consumer, claim.devices[0].address))
    except exception.ClaimRejected:
        results.put((consumer, None))


def test_fifty_processes_race_for_the_last_ten_vfs(conf):
    mgr = factory.claim_manager(conf)
    # 16 VFs, 6 taken: 10 left for 50 contenders.
    mgr.claim('ffffffff-0000-4000-8000-000000000000',
              host.alloc((host.PF0_RP, 'SRIOV_NET_VF', 6)),
              tree=host.tree(vf_total=VFS),
              snapshot=host.snapshot(vf_count=VFS))
    ctx = multiprocessing.get_context('fork')
    start = ctx.Event()
    results = ctx.Queue()
    consumers = [f'{i:08x}-0000-4000-8000-000000000000' for i in range(50)]
    procs = [ctx.Process(target=_claim_one_vf,
                         args=(mgr.store.path, consumer, start, results))
             for consumer in consumers]
    for p in procs:
        p.start()
    start.set()
    outcomes = [results.get(timeout=120) for _ in consumers]
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    winners = [vf for _, vf in outcomes if vf is not None]
    assert len(winners) == 10
    stored = [d.address for c in mgr.list() for d in c.devices]
    assert len(stored) == len(set(stored)) == VFS
    assert set(winners) <= set(stored)
    assert len(mgr.list()) == 11
