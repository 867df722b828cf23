"""Provider -> host names from a real Placement (in-process, SQLite),
counted: one read per tree, remembered per process for MAX_AGE, read
again before a host is refused."""

import pytest

from node_agent.api import fault
from node_agent.api import roots
from tests.functional.api.conftest import GPU1
from tests.functional.api.conftest import GPU2
from tests.functional.api.conftest import ROOT1
from tests.functional.api.conftest import add_providers


class Counted:
    """The real Adapter, its GETs counted."""

    def __init__(self, adapter):
        self.adapter = adapter
        self.gets = 0

    def get(self, *args, **kwargs):
        self.gets += 1
        return self.adapter.get(*args, **kwargs)


def test_one_read_per_tree_remembered(placement_adapter):
    add_providers(placement_adapter)
    counted = Counted(placement_adapter)
    now = [0.0]
    lookup = roots.Roots(counted, clock=lambda: now[0])
    assert lookup.host_of(GPU1, expected='compute1') == 'compute1'
    assert counted.gets == 1
    # The whole tree was read: its root and its GPU are remembered.
    assert lookup.host_of(ROOT1, expected='compute1') == 'compute1'
    assert lookup.host_of(GPU1, expected='compute1') == 'compute1'
    assert counted.gets == 1
    # Not the host nova names: read again before the refusal.
    assert lookup.host_of(GPU1, expected='compute2') == 'compute1'
    assert counted.gets == 2
    assert lookup.host_of(GPU2, expected='compute2') == 'compute2'
    assert counted.gets == 3
    # Past MAX_AGE: read again.
    now[0] += roots.MAX_AGE
    assert lookup.host_of(GPU1, expected='compute1') == 'compute1'
    assert counted.gets == 4


def test_an_unknown_provider_is_refused(placement_adapter):
    add_providers(placement_adapter)
    lookup = roots.Roots(placement_adapter)
    unknown = '99999999-0000-4000-8000-000000000009'
    with pytest.raises(fault.BadRequest) as err:
        lookup.host_of(unknown, expected='compute1')
    assert f'Resource provider {unknown} is not in Placement' in str(
        err.value)
