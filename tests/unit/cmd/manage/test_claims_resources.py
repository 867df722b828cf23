"""``claims create`` resources: each provider and class named once."""

import pytest

from node_agent import exception
from node_agent.cmd.manage import claims

RP = '0b3e1c52-6f0a-4c8e-9f3b-2d1a0e6d0001'


def test_resources_in_the_allocation_shape():
    assert claims.parse_resources([f'{RP}:VCPU=5', f'{RP}:MEMORY_MB=512']) \
        == {RP: {'resources': {'VCPU': 5, 'MEMORY_MB': 512}}}


def test_a_class_given_twice_is_refused_naming_it():
    with pytest.raises(exception.InvalidClaimRequest) as err:
        claims.parse_resources([f'{RP}:VCPU=5', f'{RP}:VCPU=1'])
    assert f"'{RP}:VCPU=1': {RP}:VCPU is already given ({RP}:VCPU=5)" in \
        str(err.value)
