"""JSON schemas of request bodies, one module per resource, and the one
validator that applies them (:func:`validate`)."""

import jsonschema

from node_agent.api import fault

UUID = {'type': 'string',
        'pattern': '^[0-9a-fA-F]{8}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?'
                   '[0-9a-fA-F]{4}-?[0-9a-fA-F]{12}$'}


def validate(document, schema, what):
    """Raise BadRequest naming the first fault of ``document``."""
    validator = jsonschema.Draft202012Validator(schema)
    error = jsonschema.exceptions.best_match(validator.iter_errors(document))
    if error is not None:
        where = '/'.join(str(p) for p in error.absolute_path)
        at = f' at /{where}' if where else ''
        raise fault.BadRequest(f'Invalid {what}{at}: {error.message}')
