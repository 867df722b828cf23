"""tools/run-tests.sh's groups (tests/fixtures/scheduling.py) hold every
test that asks for a fixture made once per worker."""

import ast
import os

from tests.fixtures import scheduling

TESTS = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
REPO = os.path.dirname(TESTS)


def _test_modules():
    # Not into tests/fixtures: its recorded sysfs trees' symlinks loop.
    for top, dirs, files in os.walk(TESTS):
        dirs[:] = sorted(d for d in dirs
                         if d != 'fixtures' and not d.startswith('_'))
        yield from (os.path.join(top, name) for name in sorted(files)
                    if name.startswith('test_') and name.endswith('.py'))


def _tests_asking_for(fixture):
    """Node ids of the test functions naming ``fixture`` as an argument."""
    found = []
    for path in _test_modules():
        with open(path) as f:
            tree = ast.parse(f.read())
        rel = os.path.relpath(path, REPO)
        found += [f'{rel}::{node.name}' for node in tree.body
                  if isinstance(node, ast.FunctionDef)
                  and node.name.startswith('test_')
                  and fixture in [a.arg for a in node.args.args]]
    return found


def test_every_test_of_a_per_worker_fixture_is_in_its_group():
    for fixture, group in scheduling.PER_WORKER.items():
        users = _tests_asking_for(fixture)
        assert users, fixture
        assert {nodeid: scheduling.group_of(nodeid) for nodeid in users} \
            == dict.fromkeys(users, group), fixture


def test_any_other_test_is_a_unit_of_its_own():
    nodeid = 'tests/unit/repository/test_scheduling.py::test_any_other_test'
    assert scheduling.group_of(nodeid) == nodeid
    assert scheduling.group_of(
        'tests/bench/test_smoke.py::test_fleet') == \
        'tests/bench/test_smoke.py::test_fleet'
