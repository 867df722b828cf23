"""Which device a step not taken withholds, and how it is named, on
recorded hosts 4 and 2 (pure: plans against their snapshots)."""

from node_agent.gpu_layout import plan
from node_agent.gpu_layout import readiness
from node_agent.gpu_layout.target import Target

L40S = '0000:af:00.0'
H100 = '0000:5d:00.0'           # host 2: MIG off


def _entries(snapshot, target, failed=None, **others):
    planned = plan.plan((target,), snapshot, plan.holds(snapshot, **others))
    return readiness.entries(planned, snapshot, failed)


def _said(found):
    return [(e.device, e.state, e.step, e.withheld) for e in found]


def test_a_vf_type_withholds_the_vf_a_failed_one_says_why(host4):
    vf1 = host4.gpu(L40S).vfs[1].address
    step = f'{L40S} VF 1: current_vgpu_type = 1155'
    found = _entries(host4, Target(L40S, ('s',), sriov_vfs=4,
                                   vf_types=(1155, 1155, 0, 0)),
                     failed={step: 'wanted 1155, read 0'})
    assert _said(found) == [(vf1, 'failed', step, True)]
    assert found[0].why == 'wanted 1155, read 0'
    assert readiness.summary(found) == \
        'GPU layout: 1 step failed, see tree show'


def test_a_refused_step_names_who_and_withholds_nothing(host4):
    found = _entries(host4, Target(L40S, ('s',), sriov_vfs=2),
                     drains={L40S: 'fan swap'})
    assert _said(found) == [(L40S, 'refused', f'{L40S}: sriov_numvfs = 2',
                             False)]
    assert 'drain fan swap' in found[0].why


def test_mig_mode_withholds_the_gpu_instances_to_create_nothing(host2):
    found = _entries(host2, Target(H100, ('s',), mig_mode=True,
                                   mig_instances=(('1g.10gb', 2),)))
    assert [(e.step, e.withheld) for e in found] == [
        (f'{H100}: mig_mode = True', True),
        (f'{H100}: gpu_instance_create = 1g.10gb', False),
        (f'{H100}: gpu_instance_create = 1g.10gb', False),
        (f'{H100}: compute_instance_create = 1g.10gb', False),
        (f'{H100}: compute_instance_create = 1g.10gb', False)]
    assert {e.state for e in found} == {'pending'}
    assert readiness.summary(found) == \
        'GPU layout: 5 steps pending, see tree show'


def test_the_summary_counts_each_state_and_is_empty_when_all_taken():
    def entry(state):
        return readiness.Entry('d', state, 's', 'why', False)
    found = [entry('refused'), entry('refused'), entry('failed'),
             entry('pending')]
    assert readiness.summary(found) == (
        'GPU layout: 2 steps refused, 1 failed, 1 pending, see tree show')
    assert readiness.summary(()) == ''
