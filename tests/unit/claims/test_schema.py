"""Claim request schemas: every integer bounded, errors naming the field."""

import pytest

from node_agent import exception
from node_agent.claims import schema


def integers(node, path='$'):
    """``[(path, node)]`` of every ``"type": "integer"`` in a schema."""
    found = []
    if isinstance(node, dict):
        if node.get('type') == 'integer':
            found.append((path, node))
        for key, value in node.items():
            found.extend(integers(value, f'{path}.{key}'))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            found.extend(integers(value, f'{path}[{i}]'))
    return found


@pytest.mark.parametrize('name', ['CLAIM', 'RELEASE', 'LIST'])
def test_every_integer_has_bounds(name):
    for path, node in integers(getattr(schema, name)):
        assert 'minimum' in node and 'maximum' in node, f'{name} {path}'
        assert node['maximum'] <= schema.MAX_ID, f'{name} {path}'


@pytest.mark.parametrize('payload, field', [
    ({'claim_id': 2 ** 70}, 'claim_id'),
    ({'claim_id': 2 ** 63}, 'claim_id'),
    ({'claim_id': 0}, 'claim_id'),
])
def test_release_claim_id_out_of_range_names_the_field(payload, field):
    with pytest.raises(exception.InvalidClaimRequest) as err:
        schema.validate(payload, schema.RELEASE)
    assert err.value.field == field
    assert err.value.reason == (
        f'must be an integer from 1 to {schema.MAX_ID}')


def test_claim_id_accepts_the_largest_sqlite_integer():
    assert schema.claim_id(str(2 ** 63 - 1)) == 2 ** 63 - 1
    assert schema.claim_id(7) == 7
