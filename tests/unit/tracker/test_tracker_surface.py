"""Other modules use the tracker through its methods and its last Round.

The package and the tests are parsed: every attribute read or assigned
on a ResourceTracker outside ``node_agent/tracker/tracker.py`` (the names
it goes by: ``rt``, ``tracker``, ``self.tracker``, ``self.rt``,
``agent.rt``) must be one of its public methods or ``round``; nothing is
assigned to it.  Tests reach the tracker as other modules do.
"""

import ast
import inspect
import pathlib

import node_agent
from node_agent.tracker import tracker as tracker_mod

PACKAGE = pathlib.Path(node_agent.__file__).parent
TESTS = PACKAGE.parent / 'tests'
# Nova's code driven in the client venv: its ``tracker`` is nova's own.
NOVA_DRIVERS = TESTS / 'clients' / 'drivers'
TRACKER = PACKAGE / 'tracker' / 'tracker.py'
# What a ResourceTracker is called outside its module.
NAMES = {'rt', 'tracker'}


def surface():
    """The public methods and properties of ResourceTracker."""
    return {name for name, _ in inspect.getmembers(
        tracker_mod.ResourceTracker) if not name.startswith('_')}


def _is_tracker(node):
    """``rt``, ``tracker``, or ``<anything>.rt`` / ``<anything>.tracker``
    (``self.tracker``, ``agent.rt``)."""
    if isinstance(node, ast.Name):
        return node.id in NAMES
    return isinstance(node, ast.Attribute) and node.attr in NAMES


def uses(path):
    """``(line, attribute, assigned)`` of every attribute taken of a
    tracker in the module at ``path``; modules that import the tracker
    module as ``tracker`` use it as a module, not an object."""
    tree = ast.parse(path.read_text(), str(path))
    module_alias = any(
        isinstance(n, ast.ImportFrom) and n.module == 'node_agent.tracker'
        and any(a.name == 'tracker' and a.asname is None for a in n.names)
        for n in ast.walk(tree))
    found = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Attribute) and _is_tracker(node.value)):
            continue
        if module_alias and isinstance(node.value, ast.Name) and \
                node.value.id == 'tracker':
            continue
        found.append((node.lineno, node.attr,
                      isinstance(node.ctx, (ast.Store, ast.Del))))
    return found


def outside():
    """Every use of a tracker outside its module, the tests' included."""
    for path in sorted(PACKAGE.rglob('*.py')) + sorted(TESTS.rglob('*.py')):
        if path != TRACKER and NOVA_DRIVERS not in path.parents:
            for line, attr, assigned in uses(path):
                where = path.relative_to(PACKAGE.parent)
                yield f'{where}:{line}', attr, assigned


def test_the_finder_sees_reads_and_assignments():
    tree_module = PACKAGE / 'tracker' / 'factory.py'
    found = {attr for _, attr, _ in uses(tree_module)}
    assert {'round', 'claim_manager', 'use_health', 'host'} <= found


def test_only_the_trackers_methods_and_round_are_used_from_outside():
    allowed = surface()
    assert 'round' in allowed
    # The one attribute that is not a method: the last Round.
    assert {a for a in allowed if not callable(getattr(
        tracker_mod.ResourceTracker, a))} == {'round'}
    wrong = [f'{where}: {attr}' for where, attr, assigned in outside()
             if assigned or attr not in allowed]
    assert wrong == []


def test_nothing_is_assigned_to_the_tracker_from_outside():
    assert [where for where, _, assigned in outside() if assigned] == []
