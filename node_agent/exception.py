"""Every error the agent raises, in one place.

::

    NodeAgentError
     +-- ConfigError                      bad option value or config file
     |    +-- ProviderOverrideError       bad provider override YAML
     +-- HardwareError
     |    +-- LibvirtConnectionError      libvirt unreachable (names the URI)
     |    +-- SysfsReadError              one sysfs file unreadable or garbled
     |                                    (names the path); the item is skipped
     +-- PlacementError                   anything Placement said (or not)
     |    +-- PlacementUnavailable        unreachable / 5xx after retries
     |    +-- PlacementAPIError           unexpected 4xx (status, code, detail)
     |    +-- ResourceProviderNotFound
     |    +-- GenerationConflict          409 concurrent_update, retriable
     |    |    +-- ReshapeConflict        409 from POST /reshaper, retriable
     |    +-- InventoryInUse              inventory with allocations cannot go
     |    +-- ReshapeFailed               POST /reshaper failed for good; fatal
     |                                    at startup
     +-- ReshapeNeeded                    signal from drivers: run a reshape
     +-- StateTooNew                      a file under state_path written by a
     |                                    newer agent (names file, versions)
     +-- ClaimError
          +-- InvalidClaimRequest         malformed payload (names the field)
          +-- ClaimRejected               does not fit (names provider, class)
          +-- ClaimNotFound

Placement error codes (``errors[].code`` in its JSON error body) map to these
classes in :mod:`node_agent.placement.errors`, and nowhere else. Messages name
the provider, consumer, option or field at fault.
"""


class NodeAgentError(Exception):
    """Base class for every error raised by node-agent."""


class ConfigError(NodeAgentError):
    """A configuration option or file is invalid."""


class ProviderOverrideError(ConfigError):
    """A provider override file is invalid: names the file, path and reason."""

    def __init__(self, filename, path, reason):
        self.filename = filename
        self.path = path
        self.reason = reason
        super().__init__(
            f'provider override file {filename}: at {path}: {reason}')


class HardwareError(NodeAgentError):
    """Hardware discovery failed in a way that cannot be skipped."""


class LibvirtConnectionError(HardwareError):
    """libvirt could not be reached at the configured URI."""

    def __init__(self, uri, reason, hint=None):
        self.uri = uri
        self.reason = reason
        msg = f'cannot connect to libvirt at {uri!r}: {reason}'
        if hint:
            msg += f' ({hint})'
        super().__init__(msg)


class SysfsReadError(HardwareError):
    """A sysfs file is missing, unreadable or does not parse.

    Discovery catches it, logs it and skips the item: one bad file never
    stops a scan.
    """

    def __init__(self, path, reason):
        self.path = path
        self.reason = reason
        super().__init__(f'{path}: {reason}')


class PlacementError(NodeAgentError):
    """Base for errors talking to Placement."""


class PlacementUnavailable(PlacementError):
    """Placement did not answer, or answered 5xx, after bounded retries."""


class PlacementAPIError(PlacementError):
    """Placement answered with an unexpected error status."""

    def __init__(self, method, url, status, code=None, detail=None):
        self.method = method
        self.url = url
        self.status = status
        self.code = code
        self.detail = detail
        msg = f'{method} {url} returned {status}'
        if code:
            msg += f' ({code})'
        if detail:
            msg += f': {detail}'
        super().__init__(msg)


class ResourceProviderNotFound(PlacementError):
    def __init__(self, provider):
        self.provider = provider
        super().__init__(f'resource provider {provider} not found in '
                         'Placement')


class GenerationConflict(PlacementError):
    """A provider or consumer generation moved under us (retriable)."""

    def __init__(self, provider=None, detail=None):
        self.provider = provider
        self.detail = detail
        what = f'resource provider {provider}' if provider else 'Placement'
        msg = f'generation conflict on {what}'
        if detail:
            msg += f': {detail}'
        super().__init__(msg)


class ReshapeConflict(GenerationConflict):
    """POST /reshaper answered 409, or a consumer about to be moved changed
    while the reshape was prepared: re-read and retry."""


class InventoryInUse(PlacementError):
    """Inventory that has allocations against it cannot be removed."""

    def __init__(self, provider, resource_class, detail=None):
        self.provider = provider
        self.resource_class = resource_class
        msg = (f'cannot remove {resource_class} inventory from resource '
               f'provider {provider}: it has allocations')
        if detail:
            msg += f' ({detail})'
        super().__init__(msg)


class ReshapeFailed(PlacementError):
    """A reshape was needed, attempted and failed for good.

    At startup this stops the service: running on with a half-understood
    tree would schedule against inventory that is not where Placement thinks.
    """

    def __init__(self, reason, providers=(), consumers=()):
        self.reason = reason
        self.providers = sorted(providers)
        self.consumers = sorted(consumers)
        msg = f'reshape failed: {reason}'
        if self.providers:
            msg += f'; providers: {", ".join(self.providers)}'
        if self.consumers:
            msg += f'; consumers: {", ".join(self.consumers)}'
        super().__init__(msg)


class ReshapeNeeded(NodeAgentError):
    """Raised by a driver when inventory with allocations must move.

    Only a signal: the tracker gathers allocations and calls the drivers
    again with them (startup only).
    """

    def __init__(self, reason=''):
        self.reason = reason
        super().__init__(reason or 'reshape needed')


class StateTooNew(NodeAgentError):
    """A local state file has a schema newer than this agent knows.

    Fatal: the file is left as it is (a downgrade must not lose data).
    """

    def __init__(self, path, version, known):
        self.path = path
        self.version = version
        self.known = known
        super().__init__(
            f'{path} is at schema version {version}, newer than this agent '
            f'knows ({known}); refusing to downgrade: run the newer agent '
            'or move the file away')


class ClaimError(NodeAgentError):
    """Base for claim failures."""


class InvalidClaimRequest(ClaimError):
    def __init__(self, field, reason):
        self.field = field
        self.reason = reason
        super().__init__(f'invalid claim request: {field}: {reason}')
        # cls(*args) must rebuild it: pickling, and oslo.messaging turning
        # a remote error back into this class on the client side.
        self.args = (field, reason)

    def __str__(self):
        return f'invalid claim request: {self.field}: {self.reason}'


class ClaimRejected(ClaimError):
    """The claim does not fit what is left on a provider."""

    def __init__(self, message, provider=None, resource_class=None):
        self.provider = provider
        self.resource_class = resource_class
        # oslo.messaging passes ``kwargs`` back to the constructor when it
        # rebuilds a remote error.
        self.kwargs = {'provider': provider, 'resource_class': resource_class}
        super().__init__(message)


class ClaimNotFound(ClaimError):
    def __init__(self, claim):
        self.claim = claim
        super().__init__(f'claim {claim} not found')
        self.args = (claim,)

    def __str__(self):
        return f'claim {self.claim} not found'
