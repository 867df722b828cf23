"""The import structure of ``node_agent``: no cycles, no module too long.

Every ``import`` and ``from ... import`` in every module counts, function
level ones included: an import deferred into a function to dodge a
cycle is still a dependency. Two facts are asserted:

- no import cycle between modules;
- no package that imports a package which imports it back (a package
  here is a direct sub-package of ``node_agent`` or a top-level module
  such as ``node_agent.identity``);

and no module is longer than ``MAX_LINES``, no function (or method)
longer than ``MAX_FUNCTION_LINES`` from its ``def`` to its last line,
docstring included.  The tests follow the code: a unit test sits at the
path of its module, no test module (``test_*.py``) is imported by another
file of the tests, the benchmarks or the tools (what they share lives in
``tests/fixtures/`` or a ``conftest.py``), and no test reads a private
name of the daemon's parts (``DAEMON_PARTS``).  No driver reads the
configuration: a driver's module names ``conf`` only where it registers
its options (``register_opts``), and reads its own option groups from the
frozen value its set hands it (:mod:`node_agent.drivers.context`); the
driver set's builders (``DRIVER_SET_BUILDERS``) are the ones that read
``conf``.  A reservation reaches Placement through one of two entries,
called only from the modules ``RESERVATION_WRITERS`` lists (and
:mod:`node_agent.tracker.withhold` documents).  A provider's fields
(``PROVIDER_FIELDS``) are written only by
:class:`node_agent.provider_tree.ProviderTree`'s methods.
"""

import ast
import os
import re

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))
PACKAGE = 'node_agent'
MAX_LINES = 500
MAX_FUNCTION_LINES = 60


def module_files():
    """{module name: path} for every module under node_agent/."""
    found = {}
    base = os.path.join(ROOT, PACKAGE)
    for dirpath, dirnames, filenames in os.walk(base):
        dirnames[:] = sorted(d for d in dirnames if d != '__pycache__')
        for name in filenames:
            if not name.endswith('.py'):
                continue
            path = os.path.join(dirpath, name)
            rel = os.path.relpath(path, ROOT)[:-3].split(os.sep)
            if rel[-1] == '__init__':
                rel = rel[:-1]
            found['.'.join(rel)] = path
    return found


def _resolve(name, modules):
    """The longest prefix of dotted ``name`` that is a known module."""
    parts = name.split('.')
    while parts:
        candidate = '.'.join(parts)
        if candidate in modules:
            return candidate
        parts.pop()
    return None


def imports_of(module, path, modules):
    """The node_agent modules that ``module`` imports, anywhere in it."""
    with open(path, encoding='utf-8') as f:
        tree = ast.parse(f.read(), path)
    is_package = path.endswith('__init__.py')
    targets = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split('.')
                if not is_package:
                    base = base[:-1]
                base = base[:len(base) - (node.level - 1)]
                prefix = '.'.join(base)
                source = (prefix + '.' + node.module if node.module
                          else prefix)
            else:
                source = node.module or ''
            # "from pkg import mod" imports pkg.mod when it is a module.
            names = [source + '.' + alias.name for alias in node.names]
            names.append(source)
        else:
            continue
        for name in names:
            if not name.startswith(PACKAGE):
                continue
            target = _resolve(name, modules)
            if target and target != module:
                targets.add(target)
    return targets


def import_graph():
    modules = module_files()
    return {m: imports_of(m, p, modules) for m, p in modules.items()}


def package_of(module):
    """node_agent.X for node_agent.X[.anything]; node_agent itself."""
    parts = module.split('.')
    return '.'.join(parts[:2])


def _ancestors(module):
    parts = module.split('.')
    return {'.'.join(parts[:i]) for i in range(1, len(parts))}


def find_cycles(graph):
    """Strongly connected components with more than one member."""
    index, low, on_stack, stack, result = {}, {}, set(), [], []
    counter = [0]

    def visit(node):
        index[node] = low[node] = counter[0]
        counter[0] += 1
        stack.append(node)
        on_stack.add(node)
        for succ in sorted(graph.get(node, ())):
            if succ not in index:
                visit(succ)
                low[node] = min(low[node], low[succ])
            elif succ in on_stack:
                low[node] = min(low[node], index[succ])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                result.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(result)


def module_cycles(graph):
    # Importing a sub-module runs its package's __init__ first; that
    # edge is Python's, not the code's, so it is left out here.
    pruned = {m: {t for t in targets if t not in _ancestors(m)}
              for m, targets in graph.items()}
    return find_cycles(pruned)


def package_pairs(graph):
    """Pairs of packages that import each other."""
    edges = set()
    for module, targets in graph.items():
        for target in targets:
            a, b = package_of(module), package_of(target)
            if a != b and PACKAGE not in (a, b):
                edges.add((a, b))
    return sorted((a, b) for a, b in edges if a < b and (b, a) in edges)


def test_the_graph_is_read():
    graph = import_graph()
    assert 'node_agent.tracker.factory' in graph
    assert 'node_agent.placement.plan' in graph[
        'node_agent.tracker.tracker'] | set().union(*graph.values())
    # A function-level import is seen.
    modules = {'node_agent.a': '', 'node_agent.b': ''}
    tree_src = 'def f():\n    from node_agent import b\n'
    path = os.path.join(ROOT, 'tests', 'unit', '_structure_probe.py')
    with open(path, 'w', encoding='utf-8') as f:
        f.write(tree_src)
    try:
        assert imports_of('node_agent.a', path, modules) == {'node_agent.b'}
    finally:
        os.unlink(path)


def test_the_checks_see_a_cycle():
    graph = {'node_agent.a.x': {'node_agent.b.y'},
             'node_agent.b.y': {'node_agent.a.z'},
             'node_agent.a.z': {'node_agent.a.x'}}
    assert module_cycles(graph) == [
        ['node_agent.a.x', 'node_agent.a.z', 'node_agent.b.y']]
    assert package_pairs(graph) == [('node_agent.a', 'node_agent.b')]
    assert package_pairs({'node_agent.a.x': {'node_agent.b.y'}}) == []


def test_no_import_cycle_between_modules():
    assert module_cycles(import_graph()) == []


def test_no_package_imports_one_that_imports_it_back():
    assert package_pairs(import_graph()) == []


def test_no_module_is_too_long():
    long = {}
    for module, path in module_files().items():
        with open(path, encoding='utf-8') as f:
            count = sum(1 for _ in f)
        if count > MAX_LINES:
            long[module] = count
    assert long == {}, f'modules over {MAX_LINES} lines: {long}'


def long_functions(path):
    """``{name: lines}`` of the functions in ``path`` over the limit."""
    with open(path, encoding='utf-8') as f:
        tree = ast.parse(f.read(), path)
    return {f'{node.name}:{node.lineno}': node.end_lineno - node.lineno + 1
            for node in ast.walk(tree)
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
            and node.end_lineno - node.lineno + 1 > MAX_FUNCTION_LINES}


def test_the_function_check_sees_a_long_one(tmp_path):
    path = tmp_path / 'probe.py'
    body = ''.join(f'    x{i} = {i}\n' for i in range(MAX_FUNCTION_LINES))
    path.write_text('def short():\n    pass\n\n\ndef long():\n' + body)
    assert long_functions(str(path)) == {
        'long:5': MAX_FUNCTION_LINES + 1}


def test_no_function_is_too_long():
    long = {}
    for module, path in module_files().items():
        long.update({f'{module}.{name}': n
                     for name, n in long_functions(path).items()})
    assert long == {}, (f'functions over {MAX_FUNCTION_LINES} lines: '
                        f'{long}')


# -- tests follow the code ---------------------------------------------------

UNIT = os.path.join(ROOT, 'tests', 'unit')
#: Tests of the repository itself (its layout, packaging, shipped unit
#: files, the test fixtures): no module of node_agent to sit beside.
REPOSITORY_TESTS = os.path.join(UNIT, 'repository')


def unit_tests_away_from_their_module(unit=UNIT, package=PACKAGE):
    """Unit test files that sit at no module's path: ``tests/unit/<dir>/
    test_<name>.py`` tests ``node_agent/<dir>/<module>`` (a file or a
    package) where ``<name>`` is ``<module>`` or ``<module>_<aspect>``."""
    away = []
    for dirpath, _, files in os.walk(unit):
        if os.path.commonpath([dirpath, REPOSITORY_TESTS]) == \
                REPOSITORY_TESTS:
            continue
        rel = os.path.relpath(dirpath, unit)
        beside = os.path.join(ROOT, package, '' if rel == '.' else rel)
        modules = [m.removesuffix('.py') for m in (
            os.listdir(beside) if os.path.isdir(beside) else ())
            if m != '__init__.py' and (
                m.endswith('.py') or os.path.isdir(os.path.join(beside, m)))]
        for name in files:
            if not (name.startswith('test_') and name.endswith('.py')):
                continue
            tested = name[len('test_'):-len('.py')]
            if not any(tested == m or tested.startswith(m + '_')
                       for m in modules):
                away.append(os.path.relpath(os.path.join(dirpath, name),
                                            ROOT))
    return sorted(away)


def test_the_path_check_sees_a_test_away_from_its_module(tmp_path):
    (tmp_path / 'tracker').mkdir()
    for name in ('test_tracker_surface.py', 'test_watched.py'):
        (tmp_path / 'tracker' / name).write_text('')
    assert [os.path.basename(p) for p in unit_tests_away_from_their_module(
        str(tmp_path))] == ['test_watched.py']


def test_unit_tests_sit_at_the_paths_of_their_modules():
    assert unit_tests_away_from_their_module() == []


def imported_test_modules(*roots):
    """``{test module imported: [importing file, ...]}`` over ``roots``
    (default: the tests, the benchmarks and the tools)."""
    found = {}
    for dirpath, _, files in (walked for root in roots or (
            os.path.join(ROOT, d) for d in ('tests', 'bench', 'tools'))
            for walked in os.walk(root)):
        for name in files:
            if not name.endswith('.py'):
                continue
            path = os.path.join(dirpath, name)
            with open(path) as f:
                tree = ast.parse(f.read(), path)
            for imported in _test_imports(tree):
                found.setdefault(imported, []).append(
                    os.path.relpath(path, ROOT))
    return found


def _test_imports(tree):
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (a.name for a in node.names
                        if _is_test_module(a.name))
        elif isinstance(node, ast.ImportFrom) and node.module and \
                node.module.split('.')[0] == 'tests':
            if _is_test_module(node.module):
                yield node.module
            else:
                yield from (f'{node.module}.{a.name}' for a in node.names
                            if a.name.startswith('test_'))


def _is_test_module(name):
    parts = name.split('.')
    return parts[0] == 'tests' and parts[-1].startswith('test_')


def test_the_import_check_sees_a_test_module_imported(tmp_path):
    (tmp_path / 'test_a.py').write_text(
        'from tests.integration import test_b as b\n'
        'from tests.fixtures import sync\n'
        'import tests.unit.test_c\n')
    assert sorted(imported_test_modules(str(tmp_path))) == [
        'tests.integration.test_b', 'tests.unit.test_c']


def test_no_test_module_is_imported_by_another_file():
    """What tests share (helpers, constants, fixtures) lives in
    tests/fixtures/ or a conftest.py, never in a test module: a test
    module imported as a library can no longer change without breaking
    files it does not know of."""
    assert imported_test_modules() == {}


# What the tests call the daemon's parts.  A read of one of their private
# names is a test reaching past what the code offers (wait_stopped(),
# health(), running()): the test then breaks on a rename the code is free
# to make, and proves something no caller can rely on.
DAEMON_PARTS = ('svc', 'rt', 'tracker', 'service', 'monitor', 'agent')
PRIVATE_READ = re.compile(r'\b(?:%s)\._[a-z]\w*' % '|'.join(DAEMON_PARTS))


def private_reads(root=os.path.join(ROOT, 'tests')):
    """``['path:line: name._private', ...]`` in the modules under
    ``root``."""
    found = []
    for dirpath, _, files in sorted(os.walk(root)):
        for name in sorted(f for f in files if f.endswith('.py')):
            path = os.path.join(dirpath, name)
            with open(path) as f:
                for number, line in enumerate(f, 1):
                    found.extend(
                        f'{os.path.relpath(path, root)}:{number}: '
                        f'{m.group()}' for m in PRIVATE_READ.finditer(line))
    return found


def test_the_private_read_check_sees_one(tmp_path):
    (tmp_path / 'test_a.py').write_text(
        'assert svc.' + '_done.wait(1)\n'
        'assert svc.wait_stopped(1)\n'
        'rt.' + '_health.records()\n')
    assert private_reads(str(tmp_path)) == [
        'test_a.py:1: svc.' + '_done', 'test_a.py:3: rt.' + '_health']


def test_no_test_reads_a_private_name_of_the_daemons_parts():
    assert private_reads() == []


#: The modules of ``node_agent/drivers`` that build a driver set from the
#: configuration (every other module there is a driver or a helper of
#: the drivers, and reads no ``conf``).
DRIVER_SET_BUILDERS = frozenset((
    '__init__.py',      # DriverSet
    'registry.py',      # finds, registers, checks and makes the drivers
    'context.py',       # the frozen value the drivers read
    'addresses.py',     # the addresses the configuration types, checked
    'overrides.py',     # the provider override files [provider_overrides]
))


def conf_reads(root=os.path.join(ROOT, PACKAGE, 'drivers'),
               builders=DRIVER_SET_BUILDERS):
    """``['path:line', ...]`` where a driver module under ``root`` names
    ``conf`` outside a ``register_opts``."""
    found = []
    for dirpath, _, files in sorted(os.walk(root)):
        for name in sorted(f for f in files if f.endswith('.py')):
            path = os.path.join(dirpath, name)
            if dirpath == root and name in builders:
                continue
            with open(path) as f:
                tree = ast.parse(f.read())
            allowed = set()
            for node in ast.walk(tree):
                if isinstance(node, ast.FunctionDef) and \
                        node.name == 'register_opts':
                    allowed.update(id(n) for n in ast.walk(node))
            found.extend(
                f'{os.path.relpath(path, root)}:{node.lineno}'
                for node in sorted(ast.walk(tree),
                                   key=lambda n: getattr(n, 'lineno', 0))
                if id(node) not in allowed and (
                    isinstance(node, ast.Name) and node.id == 'conf'
                    or isinstance(node, ast.arg) and node.arg == 'conf'
                    or isinstance(node, ast.Attribute)
                    and node.attr == 'conf'))
    return found


def test_the_conf_check_sees_a_driver_reading_conf(tmp_path):
    (tmp_path / 'registry.py').write_text('x = conf.gpu\n')
    (tmp_path / 'kind.py').write_text(
        'class K:\n'
        '    def register_opts(cls, conf):\n'
        '        conf.register_opts([])\n'
        '    def build(self):\n'
        '        return self.conf.gpu.vf_traits\n'
        '    def check(self, conf):\n'
        '        return self.options.gpu\n')
    assert conf_reads(str(tmp_path)) == ['kind.py:5', 'kind.py:6']


def test_no_driver_reads_conf_outside_its_option_groups():
    assert conf_reads() == []


#: ``{writer entry: modules that may call it}``: every reservation the
#: agent writes (:mod:`node_agent.tracker.withhold`'s docstring).
RESERVATION_WRITERS = {
    'update_from_provider_tree': {'node_agent/tracker/tracker.py'},
    'set_reserved': {'node_agent/beside_nova/nova_pci.py',
                     'node_agent/beside_nova/one_time_use/cleaning.py'},
}


def writer_calls(root=ROOT, package=PACKAGE, entries=RESERVATION_WRITERS):
    """``['path: entry', ...]``: calls of a writer entry from a module it
    does not list (the entry's own definitions in ``placement/`` aside)."""
    found = []
    base = os.path.join(root, package)
    for dirpath, _, files in sorted(os.walk(base)):
        for name in sorted(f for f in files if f.endswith('.py')):
            path = os.path.join(dirpath, name)
            rel = os.path.relpath(path, root)
            if rel.startswith(os.path.join(package, 'placement', '')):
                continue
            with open(path) as f:
                tree = ast.parse(f.read())
            for node in ast.walk(tree):
                if isinstance(node, ast.Call) and isinstance(
                        node.func, ast.Attribute) and \
                        node.func.attr in entries and \
                        rel not in entries[node.func.attr]:
                    found.append(f'{rel}: {node.func.attr}')
    return sorted(found)


def test_the_writer_check_sees_another_caller(tmp_path):
    (tmp_path / PACKAGE / 'tracker').mkdir(parents=True)
    (tmp_path / PACKAGE / 'tracker' / 'tracker.py').write_text(
        'rc.update_from_provider_tree(t, None, p)\n')
    (tmp_path / PACKAGE / 'tracker' / 'other.py').write_text(
        'rc.set_reserved(u, "x", {})\n')
    assert writer_calls(str(tmp_path)) == [
        f'{PACKAGE}/tracker/other.py: set_reserved']


def test_every_reservation_goes_through_its_listed_entry():
    assert writer_calls() == []


#: What a provider of a tree holds, written by its tree's methods only.
PROVIDER_FIELDS = frozenset(('inventory', 'traits', 'aggregates',
                             'generation', 'parent_uuid', 'root_uuid'))
_MUTATORS = frozenset(('add', 'discard', 'update', 'pop', 'remove',
                       'clear', 'setdefault', 'difference_update',
                       'intersection_update', 'popitem'))


def _a_field(node):
    """Whether ``node`` is ``<not self>.<a provider field>``."""
    return isinstance(node, ast.Attribute) and \
        node.attr in PROVIDER_FIELDS and not (
            isinstance(node.value, ast.Name) and node.value.id == 'self')


def field_writes(root=ROOT, package=PACKAGE):
    """``['path:line', ...]``: a provider field assigned, deleted from or
    mutated outside ``provider_tree.py``."""
    found = []
    base = os.path.join(root, package)
    for dirpath, _, files in sorted(os.walk(base)):
        for name in sorted(f for f in files if f.endswith('.py')):
            path = os.path.join(dirpath, name)
            rel = os.path.relpath(path, root)
            if rel == os.path.join(package, 'provider_tree.py'):
                continue
            with open(path) as f:
                tree = ast.parse(f.read())
            for node in ast.walk(tree):
                targets = []
                if isinstance(node, (ast.Assign, ast.Delete)):
                    targets = node.targets
                elif isinstance(node, ast.AugAssign):
                    targets = [node.target]
                elif isinstance(node, ast.Call) and isinstance(
                        node.func, ast.Attribute) and \
                        node.func.attr in _MUTATORS:
                    targets = [node.func.value]
                if any(_a_field(t) or isinstance(t, ast.Subscript)
                       and _a_field(t.value) for t in targets):
                    found.append(f'{rel}:{node.lineno}')
    return sorted(found)


def test_the_field_check_sees_a_write_beside_the_tree(tmp_path):
    (tmp_path / PACKAGE).mkdir()
    (tmp_path / PACKAGE / 'provider_tree.py').write_text(
        'provider.traits = set()\n')
    (tmp_path / PACKAGE / 'driver.py').write_text(
        'tree.set_fields(p.uuid, traits=t)\n'
        'p.inventory[rc] = record\n'
        'p.traits.add(trait)\n'
        'del p.inventory[rc]\n'
        'p.generation = 3\n'
        'self.traits = frozenset()\n'
        'x = p.inventory.get(rc)\n')
    assert field_writes(str(tmp_path)) == [
        f'{PACKAGE}/driver.py:2', f'{PACKAGE}/driver.py:3',
        f'{PACKAGE}/driver.py:4', f'{PACKAGE}/driver.py:5']


def test_provider_fields_are_written_through_the_tree_only():
    assert field_writes() == []
