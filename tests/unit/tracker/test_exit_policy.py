"""The exit-code policy, over every error class the agent has.

78 (``EX_CONFIG``, never restarted by systemd) only for what a restart
cannot fix; what may pass by itself is waited out with backoff and shown
in the status line.  A new error class fails this test until it is put in
the table: the policy is decided, never inherited by accident.
"""

import inspect

from node_agent import exception
from node_agent.tracker import service

POLICY = {
    # A restart cannot fix these: the operator must act.
    'ConfigError': service.FATAL,
    'ProviderOverrideError': service.FATAL,
    'RootShared': service.FATAL,           # standalone beside nova-compute
    'ReshapeFailed': service.FATAL,
    'ScanIncomplete': service.FATAL,
    'PlacementCredentialsError': service.FATAL,
    'StateTooNew': service.FATAL,
    # May pass by itself: retried with backoff, shown meanwhile.
    'PlacementUnavailable': service.WAIT,
    'IdentityUnavailable': service.WAIT,   # Keystone down: as Placement
    'LibvirtConnectionError': service.WAIT,
    'SourceSilent': service.WAIT,
    'ComputeNodeMissing': service.WAIT,
    'ReportedElsewhere': service.WAIT,     # the peer's provider may go
    'UnsafePlan': service.WAIT,            # a guest may free the device
    # A stop asked for.
    'Stopping': service.STOPPED,
    # Anything else that escapes: exit 1, restarted by systemd.
    'NodeAgentError': service.ERROR,
    'HardwareError': service.ERROR,
    'SysfsReadError': service.ERROR,
    'PlacementError': service.ERROR,
    'PlacementAPIError': service.ERROR,
    'ResourceProviderNotFound': service.ERROR,
    'GenerationConflict': service.ERROR,
    'ReshapeConflict': service.ERROR,
    'InventoryInUse': service.ERROR,
    'ReshapeNeeded': service.ERROR,
    'ClaimError': service.ERROR,
    'InvalidClaimRequest': service.ERROR,
    'ClaimRejected': service.ERROR,
    'ClaimNotFound': service.ERROR,
}


def _error_classes():
    return {name: cls for name, cls in inspect.getmembers(
        exception, inspect.isclass)
        if issubclass(cls, exception.NodeAgentError)}


def test_every_error_class_has_its_decided_exit():
    classes = _error_classes()
    assert set(classes) == set(POLICY), (
        'decide the exit of: '
        f'{sorted(set(classes) - set(POLICY))}; gone: '
        f'{sorted(set(POLICY) - set(classes))}')
    got = {name: service.disposition(cls) for name, cls in classes.items()}
    assert got == POLICY


def test_exit_statuses():
    assert (service.EXIT_OK, service.EXIT_ERROR, service.EXIT_FATAL) == (
        0, 1, 78)
