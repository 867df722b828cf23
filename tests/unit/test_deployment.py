"""The deployment layout: every rule the mode decides, read in one place."""

import ast
import dataclasses
import pathlib

import pytest

from node_agent import deployment

PACKAGE = pathlib.Path(deployment.__file__).parent

BESIDE_NOVA = deployment.Layout(
    configured='beside_nova_compute', mode='beside_nova_compute',
    deprecation=None, owns_root=False, root_traits=frozenset(),
    cpu_memory=False, numa_default=False, card_level=False,
    owner_trait=False, vf_shape='per_vf', nova_devices=True)


@pytest.mark.parametrize('configured, expected', [
    ('beside_nova_compute', BESIDE_NOVA),
    ('whole_host', deployment.Layout(
        configured='whole_host', mode='beside_nova_compute',
        deprecation=deployment.WHOLE_HOST_DEPRECATED, owns_root=False,
        root_traits=frozenset(), cpu_memory=False, numa_default=False,
        card_level=False, owner_trait=False, vf_shape='per_vf',
        nova_devices=True)),
    ('standalone', deployment.Layout(
        configured='standalone', mode='standalone', deprecation=None,
        owns_root=True,
        root_traits=frozenset({'COMPUTE_NODE', 'CUSTOM_OWNER_NODE_AGENT'}),
        cpu_memory=True, numa_default=True, card_level=True,
        owner_trait=True, vf_shape='pooled', nova_devices=False)),
])
def test_every_mode_gives_every_rule(conf, configured, expected):
    conf.set_override('deployment', configured)
    rules = deployment.layout(conf)
    assert rules == expected
    assert rules.cpu_on_root(numa_active=False) is expected.owns_root
    assert rules.cpu_on_root(numa_active=True) is False


def test_the_default_is_beside_nova_compute(conf):
    conf.clear_override('deployment')
    assert deployment.layout(conf) == BESIDE_NOVA


@pytest.mark.parametrize('configured', ['beside_nova_compute',
                                        'whole_host', 'standalone'])
def test_the_accelerator_path_is_beside_nova_only(conf, configured):
    """``[accelerator] enabled``: beside nova-compute the agent's
    providers carry its owner trait and a card's vGPU VFs are pooled;
    standalone (the whole tree the agent's already) is as it was."""
    conf.set_override('deployment', configured)
    before = deployment.layout(conf)
    conf.set_override('enabled', True, 'accelerator')
    beside = configured != 'standalone'
    assert deployment.layout(conf) == (dataclasses.replace(
        before, owner_trait=True, vf_shape='pooled', accelerators=True)
        if beside else before)


def test_the_vgpu_type_trait():
    assert deployment.vgpu_type_trait('nvidia-588') == \
        'CUSTOM_NA_VGPU_TYPE_NVIDIA_588'


def test_a_layout_is_frozen(conf):
    rules = deployment.layout(conf)
    with pytest.raises(AttributeError):
        rules.owns_root = True


def test_the_docstring_table_lists_every_rule():
    table = deployment.__doc__
    for field in deployment.Layout.__dataclass_fields__:
        if field not in ('configured', 'mode', 'deprecation'):
            assert f'\n    {field} ' in table, field


def mode_reads(source):
    """``[(line, what)]``: reads of ``[DEFAULT] deployment`` outside
    :mod:`node_agent.deployment` in Python ``source``: the ``deployment``
    attribute of any object (``conf.deployment``, ``CONF.deployment``),
    ``getattr(..., 'deployment')`` and calls of ``deployment.mode()``."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute) and node.attr == 'deployment' \
                and not (isinstance(node.value, ast.Name)
                         and node.value.id == 'node_agent'):
            found.append((node.lineno, ast.unparse(node)))
        elif isinstance(node, ast.Call):
            func = node.func
            if (isinstance(func, ast.Name) and func.id == 'getattr'
                    and any(isinstance(a, ast.Constant)
                            and a.value == 'deployment'
                            for a in node.args)):
                found.append((node.lineno, ast.unparse(node)))
            elif (isinstance(func, ast.Attribute) and func.attr == 'mode'
                  and isinstance(func.value, ast.Name)
                  and func.value.id == 'deployment'):
                found.append((node.lineno, ast.unparse(node)))
    return found


def test_the_walk_finds_every_kind_of_read():
    source = ('a = conf.deployment\n'
              'b = self.conf.deployment\n'
              'c = getattr(CONF, "deployment")\n'
              'd = deployment.mode(conf)\n'
              'e = deployment.layout(conf).owns_root\n'
              'from node_agent import deployment\n')
    assert mode_reads(source) == [
        (1, 'conf.deployment'), (2, 'self.conf.deployment'),
        (3, "getattr(CONF, 'deployment')"), (4, 'deployment.mode(conf)')]


def test_no_module_but_deployment_reads_the_option():
    found = []
    for path in sorted(PACKAGE.rglob('*.py')):
        if path == PACKAGE / 'deployment.py':
            continue
        for line, what in mode_reads(path.read_text(encoding='utf-8')):
            found.append(f'{path.relative_to(PACKAGE.parent)}:{line}: {what}')
    assert found == []
