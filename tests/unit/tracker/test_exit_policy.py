"""The exit-code policy, over every error class the agent has.

78 (``EX_CONFIG``, never restarted by systemd) only for what a restart
cannot fix; what may pass by itself is waited out with backoff and shown
in the status line.  A new error class fails this test until it is put in
the table: the policy is decided, never inherited by accident.
"""

import inspect

from node_agent import exception
from node_agent.tracker import exit_policy

POLICY = {
    # A restart cannot fix these: the operator must act.
    'ConfigError': exit_policy.FATAL,
    'ProviderOverrideError': exit_policy.FATAL,
    'RootShared': exit_policy.FATAL,           # standalone beside nova-compute
    # Raised by audits only (a startup has no tree of its own to compare
    # with); the audit is skipped, as for RootShared.
    'ProvidersShared': exit_policy.FATAL,
    'NotPlacement': exit_policy.FATAL,         # a wrong endpoint path
    'ReshapeFailed': exit_policy.FATAL,
    'ScanIncomplete': exit_policy.FATAL,
    'PlacementCredentialsError': exit_policy.FATAL,
    'StateTooNew': exit_policy.FATAL,
    # May pass by itself: retried with backoff, shown meanwhile.
    'PlacementUnavailable': exit_policy.WAIT,
    'IdentityUnavailable': exit_policy.WAIT,   # Keystone down: as Placement
    'LibvirtConnectionError': exit_policy.WAIT,
    'SourceSilent': exit_policy.WAIT,
    'ComputeNodeMissing': exit_policy.WAIT,
    'ReportedElsewhere': exit_policy.WAIT,     # the peer's provider may go
    'UnsafePlan': exit_policy.WAIT,            # a guest may free the device
    'LocalStateUnavailable': exit_policy.WAIT,  # a full disk is freed
    # Other writers moved generations under every try: contention passes.
    'GenerationConflict': exit_policy.WAIT,
    'ReshapeConflict': exit_policy.WAIT,
    # A stop asked for.
    'Stopping': exit_policy.STOPPED,
    # Anything else that escapes: exit 1, restarted by systemd.
    'NodeAgentError': exit_policy.ERROR,
    'HardwareError': exit_policy.ERROR,
    'SysfsReadError': exit_policy.ERROR,
    # A write to a device refused or not read back: layout apply and a
    # bind report it; were one to escape the daemon's start: exit 1.
    'SettingNotApplied': exit_policy.ERROR,
    'PlacementError': exit_policy.ERROR,
    'PlacementAPIError': exit_policy.ERROR,
    'ResourceProviderNotFound': exit_policy.ERROR,
    'InventoryInUse': exit_policy.ERROR,
    'ReshapeNeeded': exit_policy.ERROR,
    'ClaimError': exit_policy.ERROR,
    'InvalidClaimRequest': exit_policy.ERROR,
    'ClaimRejected': exit_policy.ERROR,
    'ClaimNotFound': exit_policy.ERROR,
    'BindRejected': exit_policy.ERROR,
    # node-agent-manage's: exit 2 there (doc/operating.md), the daemon
    # never raises it.
    'CommandRefused': exit_policy.ERROR,
    # Kept in the clean's own thread; were one to escape: exit 1.
    'NotCleaned': exit_policy.ERROR,
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
    got = {name: exit_policy.disposition(cls) for name, cls in classes.items()}
    assert got == POLICY


def test_exit_statuses():
    assert (exit_policy.EXIT_OK, exit_policy.EXIT_ERROR,
            exit_policy.EXIT_FATAL) == (0, 1, 78)


def test_every_command_exits_by_the_same_rule():
    """``node-agent`` and each ``node-agent-manage`` command: 78 for what
    the table calls fatal, 1 for the rest."""
    for name, cls in _error_classes().items():
        error = cls.__new__(cls)
        expected = (exit_policy.EXIT_FATAL
                    if POLICY[name] == exit_policy.FATAL
                    else exit_policy.EXIT_ERROR)
        if POLICY[name] == exit_policy.WAIT and issubclass(
                cls, exit_policy.FATAL_ERRORS):
            expected = exit_policy.EXIT_FATAL   # a ConfigError, waited
        assert exit_policy.exit_status(error) == expected, name
