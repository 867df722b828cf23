"""The one-time-use decisions, over values."""

from node_agent.beside_nova.one_time_use import policy
from node_agent.provider_tree import Provider

A = '0000:81:00.0'
B = '0000:82:00.0'
RC = 'CUSTOM_PCI_10DE_2330'


def provider(uuid, reserved, total=1, traits=(policy.ONE_TIME_USE_TRAIT,)):
    return Provider(uuid=uuid, name=f'compute1_{uuid}', traits=set(traits),
                    inventory={RC: {'total': total, 'reserved': reserved}})


def test_actions_first_match_wins_by_product_vendor_class_or_any():
    actions = policy.parse_actions(
        ['10DE:2330=command', '10de:*=reset', 'class:0108=nvme', '*=reset'])
    assert actions[0] == ('10de:2330', 'command')
    assert policy.action_for(actions, '10de', '2330', '030200') == 'command'
    assert policy.action_for(actions, '10de', '20b5', '030200') == 'reset'
    assert policy.action_for(actions, '144d', 'a80a', '010802') == 'nvme'
    assert policy.action_for(actions, '8086', '1572', '020000') == 'reset'
    assert policy.action_for(actions[:3], '8086', '1572', '020000') is None


def test_candidates_are_one_time_use_and_reserved_in_full():
    devices = {A: provider('a', 1), B: provider('b', 0),
               '0000:83:00.0': provider('c', 1, traits=()),
               '0000:84:00.0': provider('d', 2, total=2),
               '0000:85:00.0': provider('e', 0, total=0)}
    assert sorted(policy.candidates(devices)) == [A, '0000:84:00.0']


def test_held_by_names_the_guests():
    assert policy.held_by(('g1',)) == 'held by guest g1'
    assert policy.held_by(('g1', 'g2')) == 'held by guests g1, g2'


def test_backoff_doubles_up_to_its_cap_and_due_follows_it():
    assert [policy.backoff(n, 60, 300) for n in (1, 2, 3, 4)] == [
        60, 120, 240, 300]
    assert policy.due(None, 0)
    assert not policy.due({'next_try': 100.0}, 99.9)
    assert policy.due({'next_try': 100.0}, 100.0)


def test_summary_names_the_waiting_devices_not_those_in_use():
    records = {A: {'state': policy.FAILED, 'reason': 'cleaner exit 3'},
               B: {'state': policy.IN_USE, 'reason': 'in use'}}
    assert policy.summary(records) == (
        f'1 one-time-use device waiting: {A}: cleaner exit 3')
    records[B] = {'state': policy.TIMED_OUT, 'reason': 'killed'}
    assert policy.summary(records) == (
        f'2 one-time-use devices waiting: {A}: cleaner exit 3, {B}: killed')
    assert policy.summary({B: {'state': policy.IN_USE,
                               'reason': 'in use'}}) == ''
