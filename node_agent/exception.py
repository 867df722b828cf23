"""Every error the agent raises, in one place.

::

    NodeAgentError
     +-- ConfigError                      bad option value or config file
     |    +-- ProviderOverrideError       bad provider override YAML
     |    +-- RootShared                  a mode that owns the root found
     |    |                               another writer of it (names the
     |    |                               service, the evidence, the mode
     |    |                               to use): nothing written
     |    |    +-- ProvidersShared       another agent for this host offers
     |    |                               less on its providers: none written
     |    +-- NotPlacement                not a Placement the agent can use
     |                                    (names option, URL, what answered)
     +-- ComputeNodeMissing               beside nova-compute: its root is
     |                                    not in Placement yet; waited out
     +-- HardwareError
     |    +-- LibvirtConnectionError      libvirt unreachable (names the URI)
     |    +-- SysfsReadError              one sysfs file unreadable or garbled
     |    |                               (names the path); the item is skipped
     |    +-- ScanIncomplete              a whole source lost or contradicting
     |                                    itself (names source and path); the
     |                                    scan is not used: fatal at startup,
     |                                    an audit keeps the last good tree
     |    +-- SourceSilent                sysfs or NVML gave no answer within
     |    |                               its deadline (names source and
     |    |                               option): waited out
     |    +-- SettingNotApplied           a device setting written did not
     |                                    take (names device, file, wanted
     |                                    and read values)
     +-- PlacementError                   anything Placement said (or not)
     |    +-- PlacementUnavailable        unreachable / 5xx / timeout after
     |    |    |                          retries: transient, waited out
     |    |    +-- IdentityUnavailable    the same of Keystone, signing in or
     |    |                               renewing the token (names auth_url)
     |    +-- PlacementCredentialsError   no credentials, or refused (401,
     |    |                               403): fatal at startup
     |    +-- PlacementAPIError           unexpected 4xx (status, code, detail)
     |    +-- ResourceProviderNotFound
     |    +-- GenerationConflict          409 concurrent_update, retriable
     |    |    +-- ReshapeConflict        409 from POST /reshaper, retriable
     |    +-- InventoryInUse              inventory with allocations cannot go
     |    +-- ReshapeFailed               POST /reshaper failed for good; fatal
     |                                    at startup
     +-- ReshapeNeeded                    signal from drivers: run a reshape
     +-- Stopping                         a stop was asked for: the sync ends
     |                                    before its next request
     +-- UnsafePlan                       a plan failed its check before the
     |                                    first write (names provider, class);
     |                                    nothing written; fatal at startup
     +-- StateTooNew                      a file under state_path written by a
     |                                    newer agent (names file, versions)
     +-- LocalStateUnavailable            a file under state_path cannot be
     |                                    read or written now (disk full,
     |                                    read-only, I/O error, locked): a
     |                                    fault of the host, never taken for
     |                                    corruption; waited out
     +-- CommandRefused                   a command's argument names what
     |                                    this host cannot do it to
     |                                    (names it): nothing written
     +-- NotCleaned                       a one-time-use device not made
     |                                    ready (names it, says why): it
     |                                    stays reserved
     +-- ClaimError
          +-- InvalidClaimRequest         malformed payload (names the field)
          +-- ClaimRejected               does not fit (names provider, class)
          +-- ClaimNotFound
          +-- BindRejected                an ARQ not bound (names it, why)

Placement error codes (``errors[].code`` in its JSON error body) map to these
classes in :mod:`node_agent.placement.errors`, and nowhere else. Messages name
the provider, consumer, option or field at fault.
"""


class NodeAgentError(Exception):
    """Base class for every error raised by node-agent."""

    def for_command(self):
        """What a command that exits on this error says (nothing retries
        it): the message, unless a subclass says otherwise."""
        return str(self)


class ConfigError(NodeAgentError):
    """A configuration option or file is invalid."""


class ProviderOverrideError(ConfigError):
    """A provider override file is invalid: names the file, path and reason."""

    def __init__(self, filename, path, reason):
        self.filename, self.path, self.reason = filename, path, reason
        super().__init__(
            f'provider override file {filename}: at {path}: {reason}')


class ReportedElsewhere(ConfigError):
    """Devices the agent is configured to report are reported by another
    service already (nova-compute's pGPU or PCI providers, Cyborg's).

    ``conflicts``: ``[(ours, theirs, why)]``, provider names.  Fatal at
    startup; in an audit those devices are left as Placement has them.
    """

    def __init__(self, conflicts):
        self.conflicts = list(conflicts)
        super().__init__('; '.join(
            f'{ours} would report what {theirs} already reports ({why})'
            for ours, theirs, why in self.conflicts)
            + ': not reported twice; stop the other service reporting it '
            'or stop node-agent reporting it')


class RootShared(ConfigError):
    """A mode that owns the root (standalone) found another writer of it.

    ``service`` (``nova-compute`` or ``another service``) and
    ``evidence`` (sentences) say who and how it shows.  Nothing is
    written to the root: fatal at startup, an audit is skipped.
    """

    def __init__(self, mode, name, service, evidence):
        self.service = service
        self.evidence = list(evidence)
        self.status = (f'refusing to share root {name} with {service}: '
                       'set [DEFAULT] deployment = beside_nova_compute')
        super().__init__(
            f'[DEFAULT] deployment = {mode}: the root provider {name} has '
            f'another writer, {service}: ' + '; '.join(self.evidence)
            + f'; deployment = {mode} owns the root and shares it with no '
            'one, so nothing is written to it; where nova-compute runs '
            'set [DEFAULT] deployment = beside_nova_compute')


class ProvidersShared(RootShared):
    """Another writer (most likely another agent with the same ``host``)
    rewrites providers this agent owns, offering no more than it
    (:mod:`node_agent.tracker.second_writer`): this one writes nothing
    while it goes on; ``evidence`` names the providers and changes."""

    def __init__(self, name, evidence):
        self.service = 'another writer'
        self.evidence = list(evidence)
        self.status = (f'not writing: another writer (another agent with '
                       f'host {name}?) rewrites {len(self.evidence)} of its '
                       'providers')
        ConfigError.__init__(
            self, f'another writer rewrites the providers of {name} after '
            'each correction (another node-agent with the same [DEFAULT] '
            'host, or a copied config?): ' + '; '.join(self.evidence)
            + '; its values offer no more than this agent\'s, so this '
            'agent writes nothing while it goes on: stop one of the two')


class NotPlacement(ConfigError):
    """What answers at the configured endpoint is not a Placement the agent
    can use: ``GET /`` gave no Placement version document, or one whose
    microversion range misses what the agent pins.  Nothing was written.
    """

    def __init__(self, option, url, answered):
        self.option, self.url, self.answered = option, url, answered
        super().__init__(f'{option}: {url} is not a Placement endpoint the '
                         f'agent can use: {answered}; nothing was written')


class ComputeNodeMissing(NodeAgentError):
    """Beside nova-compute, the compute node root (``what``: uuid or name)
    is not in Placement yet; waited for (nova-compute creates it)."""

    def __init__(self, what, how):
        self.what = what
        self.status = ('waiting for nova-compute to create the compute '
                       f'node {what}')
        super().__init__(f'the compute node {what} is not in Placement '
                         f'({how}): nova-compute creates it when it first '
                         'starts')


class HardwareError(NodeAgentError):
    """Hardware discovery failed in a way that cannot be skipped."""


class LibvirtConnectionError(HardwareError):
    """libvirt could not be reached at the configured URI."""

    def __init__(self, uri, reason, hint=None):
        self.uri, self.reason = uri, reason
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
        self.path, self.reason = path, reason
        super().__init__(f'{path}: {reason}')


class ScanIncomplete(HardwareError):
    """A scan lost a whole source, or the source contradicts itself.

    Never "an empty host": the scan is not used.  ``detail`` names the path
    (or files) at fault and why.
    """

    def __init__(self, source, detail, lost=True):
        self.source, self.detail, self.lost = source, detail, lost
        state = 'lost' if lost else 'garbled'
        super().__init__(f'{source} {state} ({detail})')


class SourceSilent(HardwareError):
    """A hardware source did not answer within its deadline.

    Transient as far as the agent can tell (a driver call stuck on a
    device that may recover): the scan is not used, the daemon waits and
    tries again, the status line naming the source.
    """

    def __init__(self, source, reason):
        self.source, self.reason = source, reason
        super().__init__(f'{source}: {reason}')


class SettingNotApplied(HardwareError):
    """A device setting (a sysfs file under ``device``) did not take: the
    write was refused, or ``file`` read back ``got``, not ``wanted``."""

    def __init__(self, device, file, wanted, got, why=''):
        self.device, self.file, self.why = device, file, why
        self.wanted, self.got = wanted, got
        super().__init__(f'{device}: {file}: wanted {wanted}, read {got}'
                         + (f' ({why})' if why else ''))


class Stopping(NodeAgentError):
    """The daemon is stopping: the request named was not sent.

    Raised by the report client between two requests, never during one,
    so a stop ends a sync at a request boundary, where capacity is exact
    (see :mod:`node_agent.placement.client`); the next start finishes it.
    """

    def __init__(self, method, path):
        self.method, self.path = method, path
        super().__init__(f'stopping: {method} {path} not sent')


class PlacementError(NodeAgentError):
    """Base for errors talking to Placement."""


class PlacementUnavailable(PlacementError):
    """Placement did not answer, or answered 5xx, after bounded retries.

    Transient: the daemon waits and tries again.  ``reason`` is the short
    form for the status line (the request and what came back).
    """

    # What is awaited, for the status line and the log.
    service = 'Placement'

    def __init__(self, message, reason=None, cause=None):
        self.reason = reason or message
        # What went wrong, once, for a line that says "not reachable"
        # itself.
        self.cause = cause or message
        super().__init__(message)


class IdentityUnavailable(PlacementUnavailable):
    """The identity service (Keystone at ``[placement] auth_url``) did not
    answer while the agent signed in or renewed its token.

    Waited out as Placement itself is, but named: the operator looks at
    Keystone, not at Placement.
    """

    def __init__(self, auth_url, message, reason=None, cause=None):
        self.auth_url = auth_url
        self.service = f'Keystone at {auth_url}'
        super().__init__(message, reason, cause)


class PlacementCredentialsError(PlacementError):
    """No credentials for Placement, or Placement refused them: until
    ``[placement]`` changes, a startup exits 78 naming the cause."""


class PlacementAPIError(PlacementError):
    """Placement answered with an unexpected error status."""

    def __init__(self, method, url, status, code=None, detail=None):
        self.method = method
        self.url = url
        self.status, self.code, self.detail = status, code, detail
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
        self.provider, self.detail = provider, detail
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
        self.provider, self.resource_class = provider, resource_class
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

    def __init__(self, reason, providers=(), consumers=(), status=None):
        self.reason = reason
        # Placement's answer (400, 409) when it refused the reshape; None
        # when the agent itself found it impossible.
        self.status = status
        self.providers = sorted(providers)
        self.consumers = sorted(consumers)
        msg = f'reshape failed: {reason}'
        if self.providers:
            msg += f'; providers: {", ".join(self.providers)}'
        if self.consumers:
            msg += f'; consumers: {", ".join(self.consumers)}'
        super().__init__(msg)


class ReshapeNeeded(NodeAgentError):
    """A driver's signal that inventory with allocations must move: the
    tracker gathers allocations, calls the drivers again (startup only)."""

    def __init__(self, reason=''):
        self.reason = reason
        super().__init__(reason or 'reshape needed')


class UnsafePlan(NodeAgentError):
    """A plan would delete a provider in use, drop inventory below its
    usage or advertise more than the hardware has: nothing was written.

    At startup this stops the service; during an audit the last good tree
    stays in Placement and the error is logged.
    """

    def __init__(self, provider, resource_class, reason):
        self.provider, self.resource_class = provider, resource_class
        self.reason = reason
        super().__init__(f'unsafe plan, nothing written: {resource_class} on '
                         f'{provider}: {reason}')


class StateTooNew(NodeAgentError):
    """A local state file has a schema newer than this agent knows: fatal,
    the file is left as it is (a downgrade must not lose data)."""

    def __init__(self, path, version, known):
        self.path, self.version, self.known = path, version, known
        super().__init__(
            f'{path} is at schema version {version}, newer than this agent '
            f'knows ({known}); refusing to downgrade: run the newer agent '
            'or move the file away')


class LocalStateUnavailable(NodeAgentError):
    """A file under ``state_path`` cannot be read or written right now.

    A full or read-only filesystem, an I/O error or a lock another process
    holds too long: a fault of the host, not of the file.  Nothing is moved
    aside nor deleted; the daemon keeps what it holds in memory, says so and
    tries again (names the file and the cause).
    """

    def __init__(self, path, what, reason):
        self.path, self.what, self.reason = path, what, reason
        super().__init__(self._text('retried'))

    def _text(self, then):
        return (f'{self.what} {self.path}: {self.reason} (a fault of the '
                f'filesystem, not of the file: nothing was moved aside; '
                f'{then})')

    def for_command(self):
        return self._text('run the command again once it is mended')


class CommandRefused(NodeAgentError):
    """A ``node-agent-manage`` argument names what this host cannot do
    the command to (a device it lacks, one in another state): nothing was
    written.  Exit 2, as argparse refuses a malformed argument."""


class ClaimError(NodeAgentError):
    """Base for claim failures."""


class InvalidClaimRequest(ClaimError):
    def __init__(self, field, reason):
        self.field, self.reason = field, reason
        super().__init__(f'invalid claim request: {field}: {reason}')
        # cls(*args) must rebuild it: pickling, and oslo.messaging turning
        # a remote error back into this class on the client side.
        self.args = (field, reason)

    def __str__(self):
        return f'invalid claim request: {self.field}: {self.reason}'


class ClaimRejected(ClaimError):
    """The claim does not fit what is left on a provider."""

    def __init__(self, message, provider=None, resource_class=None):
        self.provider, self.resource_class = provider, resource_class
        # oslo.messaging passes ``kwargs`` back to the constructor when it
        # rebuilds a remote error.
        self.kwargs = {'provider': provider, 'resource_class': resource_class}
        super().__init__(message)


class BindRejected(ClaimError):
    """An accelerator request (ARQ) cannot be bound on this host: no
    allocation of its instance in Placement, no free or healthy device,
    or the ARQ already bound elsewhere.  Nothing was claimed."""

    def __init__(self, arq_uuid, provider, reason):
        self.arq_uuid, self.provider, self.reason = arq_uuid, provider, reason
        # oslo.messaging rebuilds a remote error as cls(*args, **kwargs).
        self.kwargs = {'arq_uuid': arq_uuid, 'provider': provider,
                       'reason': reason}
        super().__init__()

    def __str__(self):
        return (f'ARQ {self.arq_uuid} not bound to provider '
                f'{self.provider}: {self.reason}')


class ClaimNotFound(ClaimError):
    def __init__(self, claim):
        self.claim = claim
        super().__init__(f'claim {claim} not found')
        self.args = (claim,)

    def __str__(self):
        return f'claim {self.claim} not found'


class NotCleaned(NodeAgentError):
    """A one-time-use device was not made ready again; it stays reserved.

    ``state`` is what ``node_agent_one_time_use`` shows for it
    (:mod:`node_agent.beside_nova.one_time_use.policy`), ``reason`` the
    status line's text (``cleaner exit 3``)."""

    def __init__(self, address, state, reason):
        self.address, self.state, self.reason = address, state, reason
        super().__init__(f'{address}: {reason}')
