"""Accelerator request bodies: create (a profile's name) and the PATCH
that binds or unbinds (an RFC 6902 patch per ARQ uuid)."""

from node_agent.api import schemas

CREATE = {
    'type': 'object',
    'properties': {
        'device_profile_name': {'type': 'string', 'minLength': 1,
                                'maxLength': 255},
        'device_profile_group_id': {'type': 'integer', 'minimum': 0},
        'image_uuid': schemas.UUID,
    },
    'required': ['device_profile_name'],
    'additionalProperties': False,
}

FIELDS = ('hostname', 'device_rp_uuid', 'instance_uuid', 'project_id')
_VALUES = {
    '/hostname': {'type': 'string', 'minLength': 1, 'maxLength': 255},
    '/device_rp_uuid': schemas.UUID,
    '/instance_uuid': schemas.UUID,
    '/project_id': {'type': 'string', 'minLength': 1, 'maxLength': 255},
}

_OP = {
    'type': 'object',
    'properties': {
        'op': {'enum': ['add', 'remove']},
        'path': {'enum': sorted(_VALUES)},
        'value': {},
    },
    'required': ['op', 'path'],
    'additionalProperties': False,
    'allOf': [
        {'if': {'properties': {'op': {'const': 'add'},
                               'path': {'const': path}}},
         'then': {'properties': {'value': value}, 'required': ['value']}}
        for path, value in _VALUES.items()
    ],
}

PATCH = {
    'type': 'object',
    'propertyNames': schemas.UUID,
    'additionalProperties': {'type': 'array', 'items': _OP, 'minItems': 1,
                             'maxItems': len(_VALUES)},
    'minProperties': 1,
    'maxProperties': 256,
}
