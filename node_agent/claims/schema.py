"""Shapes of claim requests, checked with jsonschema at every entry point.

The manager and the RPC endpoint validate through the same functions, so a
request from the tracker, the command line or a remote caller is held to
the same rules.  A failure raises :class:`~node_agent.exception.
InvalidClaimRequest` naming the field (``allocation.<rp>.resources.VCPU``)
before anything is decided or written.

Amounts must be JSON integers: ``1.0`` and ``true`` are refused, although
JSON Schema would call the first an integer.  Every integer has a
``minimum`` and a ``maximum``: amounts Placement's, claim ids SQLite's, so
a huge number is a named error, never an OverflowError from below.
"""

import json

import jsonschema
from jsonschema import exceptions as js_exceptions

from node_agent import exception
from node_agent.claims import model

UUID_PATTERN = ('^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-'
                '[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$')
RESOURCE_CLASS_PATTERN = '^[A-Z0-9_]{1,255}$'

# Placement's own ceiling on an amount (a signed 32-bit column).
MAX_AMOUNT = 2 ** 31 - 1
# SQLite's ceiling on an INTEGER PRIMARY KEY (a signed 64-bit integer).
MAX_ID = 2 ** 63 - 1

# "x-reason" is the message given for a failure at that node of the
# schema; jsonschema ignores unknown keywords.
_UUID = {'type': 'string', 'pattern': UUID_PATTERN,
         'x-reason': 'must be a uuid (8-4-4-4-12 hex digits)'}
_KIND = {'type': 'string', 'enum': list(model.KINDS),
         'x-reason': 'must be one of ' + ', '.join(model.KINDS)}
_STATE = {'type': 'string', 'enum': list(model.STATES),
          'x-reason': 'must be one of ' + ', '.join(model.STATES)}
_AMOUNT = {'type': 'integer', 'minimum': 1, 'maximum': MAX_AMOUNT,
           'x-reason': f'must be an integer from 1 to {MAX_AMOUNT}'}
_CLAIM_ID = {'type': 'integer', 'minimum': 1, 'maximum': MAX_ID,
             'x-reason': f'must be an integer from 1 to {MAX_ID}'}

ALLOCATION = {
    'type': 'object',
    'minProperties': 1,
    'maxProperties': 256,
    'x-reason': 'must map 1 to 256 provider uuids to {"resources": {...}}',
    'propertyNames': {'pattern': UUID_PATTERN,
                      'x-reason': 'is not a provider uuid'},
    'additionalProperties': {
        'type': 'object',
        'required': ['resources'],
        'properties': {
            'resources': {
                'type': 'object',
                'minProperties': 1,
                'x-reason': 'must map resource classes to amounts',
                'propertyNames': {
                    'pattern': RESOURCE_CLASS_PATTERN,
                    'x-reason': 'is not a resource class name'},
                'additionalProperties': _AMOUNT,
            },
        },
        'additionalProperties': False,
        'x-reason': 'must be {"resources": {...}} and nothing else',
    },
}

CLAIM = {
    'type': 'object',
    'required': ['consumer_uuid', 'allocation'],
    'properties': {
        'consumer_uuid': _UUID,
        'kind': _KIND,
        'allocation': ALLOCATION,
    },
    'additionalProperties': False,
}

RELEASE = {
    'type': 'object',
    'properties': {
        'claim_id': _CLAIM_ID,
        'consumer_uuid': _UUID,
        'kind': _KIND,
    },
    'oneOf': [{'required': ['claim_id']}, {'required': ['consumer_uuid']}],
    'x-reason': 'give exactly one of claim_id and consumer_uuid',
    'additionalProperties': False,
}

LIST = {
    'type': 'object',
    'properties': {
        'consumer_uuid': _UUID,
        'kind': _KIND,
        'state': _STATE,
    },
    'additionalProperties': False,
}

# A device profile group as the accelerator API keeps it:
# {"resources:CUSTOM_X": "1", "trait:CUSTOM_Y": "required", ...}.
_GROUP = {
    'type': 'object',
    'minProperties': 1,
    'maxProperties': 256,
    'propertyNames': {'pattern': '^[a-z_]+:[A-Za-z0-9_.:-]{1,255}$',
                      'x-reason': 'is not a "<prefix>:<name>" key'},
    'additionalProperties': {'type': 'string', 'maxLength': 255,
                             'x-reason': 'must be a string'},
    'x-reason': 'must map 1 to 256 "resources:"/"trait:" keys to strings',
}

BIND = {
    'type': 'object',
    'required': ['arq_uuid', 'instance_uuid', 'provider_uuid',
                 'device_profile_name', 'group_id', 'group'],
    'properties': {
        'arq_uuid': _UUID,
        'instance_uuid': _UUID,
        'provider_uuid': _UUID,
        'device_profile_name': {'type': 'string', 'minLength': 1,
                                'maxLength': 255,
                                'x-reason': 'must be 1 to 255 characters'},
        'group_id': {'type': 'integer', 'minimum': 0, 'maximum': MAX_AMOUNT,
                     'x-reason': 'must be the group\'s index'},
        'group': _GROUP,
    },
    'additionalProperties': False,
}

UNBIND = {
    'type': 'object',
    'required': ['arq_uuid'],
    'properties': {'arq_uuid': _UUID},
    'additionalProperties': False,
}

_base = jsonschema.Draft202012Validator
_Validator = jsonschema.validators.extend(
    _base,
    type_checker=_base.TYPE_CHECKER.redefine(
        'integer',
        lambda _checker, value: (isinstance(value, int)
                                 and not isinstance(value, bool))))


def _field(error, root):
    parts = [root] if root else []
    parts.extend(str(p) for p in error.absolute_path)
    if 'propertyNames' in error.schema_path:
        parts.append(str(error.instance))
    elif error.validator == 'additionalProperties' and isinstance(
            error.instance, dict):
        known = set(error.schema.get('properties', {}))
        extra = sorted(k for k in error.instance if k not in known)
        if extra:
            parts.append(str(extra[0]))
            return '.'.join(parts), 'is not an accepted field'
    elif error.validator == 'required':
        missing = [k for k in error.validator_value
                   if k not in (error.instance or {})]
        if missing:
            parts.append(missing[0])
            return '.'.join(parts), 'is required'
    return '.'.join(parts) or 'payload', None


def validate(document, schema, max_bytes=None, root=None):
    """Raise InvalidClaimRequest unless ``document`` matches ``schema``."""
    if max_bytes is not None:
        try:
            size = len(json.dumps(document).encode())
        except (TypeError, ValueError) as exc:
            raise exception.InvalidClaimRequest(
                root or 'payload', f'is not JSON: {exc}')
        if size > max_bytes:
            raise exception.InvalidClaimRequest(
                root or 'payload',
                f'is {size} bytes, more than the limit of {max_bytes} '
                '([claims] max_request_bytes)')
    error = js_exceptions.best_match(_Validator(schema).iter_errors(document))
    if error is None:
        return
    field, reason = _field(error, root)
    raise exception.InvalidClaimRequest(
        field, reason or error.schema.get('x-reason') or error.message)


def claim_id(value):
    """``value`` (an int, or its decimal digits) as a claim id, checked.

    InvalidClaimRequest naming ``claim_id`` unless it is from 1 to
    :data:`MAX_ID`.
    """
    if isinstance(value, str) and value.isascii() and value.isdigit():
        value = int(value)
    validate(value, _CLAIM_ID, root='claim_id')
    return value


def normalize_allocation(allocation):
    """Validated allocation -> ``{rp (lower case): {rc: amount}}``."""
    return {rp.lower(): dict(record['resources'])
            for rp, record in allocation.items()}
