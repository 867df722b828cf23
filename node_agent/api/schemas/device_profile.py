"""A device profile to create: Cyborg's body, a list of one profile (a
bare object is taken too).

A group's keys are ``resources:<CLASS>`` (an amount), ``trait:<CUSTOM_T>``
(``required`` or ``forbidden``) and ``accel:<name>`` (passed through);
that every group asks for some resource is checked by the handler.
"""

from node_agent.api import schemas

NAME = '^[a-zA-Z0-9-_]+$'

GROUP = {
    'type': 'object',
    'patternProperties': {
        '^resources:[A-Z][A-Z0-9_]{0,254}$': {
            'type': 'string', 'pattern': '^[1-9][0-9]{0,5}$'},
        '^trait:CUSTOM_[A-Z0-9_]{1,248}$': {
            'enum': ['required', 'forbidden']},
        '^accel:[a-zA-Z0-9_.:-]{1,249}$': {
            'type': 'string', 'maxLength': 255},
    },
    'additionalProperties': False,
    'minProperties': 1,
}

PROFILE = {
    'type': 'object',
    'properties': {
        'name': {'type': 'string', 'pattern': NAME, 'maxLength': 255},
        'uuid': schemas.UUID,
        'description': {'type': ['string', 'null'], 'maxLength': 1024},
        'groups': {'type': 'array', 'items': GROUP, 'minItems': 1,
                   'maxItems': 64},
    },
    'required': ['name', 'groups'],
    'additionalProperties': False,
}

CREATE = {
    'oneOf': [
        PROFILE,
        {'type': 'array', 'items': PROFILE, 'minItems': 1, 'maxItems': 1},
    ],
}
