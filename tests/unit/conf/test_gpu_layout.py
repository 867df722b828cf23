"""[gpu_layout:<device>] sections as the commands load them: a bad value
names the section and option, a misspelt option is warned about, and the
sample config's placeholder section is no declaration."""

import pytest

from node_agent import cmd  # noqa: F401  (blocks eventlet, as the commands do)
from node_agent import exception
from node_agent.conf import gpu_layout
from node_agent.conf import loader


def _load(tmp_path, text):
    path = tmp_path / 'agent.conf'
    path.write_text(f'[DEFAULT]\nstate_path = {tmp_path}\n' + text)
    return loader.load(['--config-file', str(path)]), str(path)


@pytest.mark.parametrize('text, message', [
    ('sriov_vfs = -1\n', '[gpu_layout:0000:af:00.0] sriov_vfs = -1: '),
    ('mig_mode = maybe\n', '[gpu_layout:0000:af:00.0] mig_mode = maybe: '),
    ('mig_instances = 1g.10gb:x\n',
     '[gpu_layout:0000:af:00.0] mig_instances = 1g.10gb:x: '),
])
def test_a_bad_value_names_section_and_option(tmp_path, text, message):
    with pytest.raises(exception.ConfigError) as exc:
        _load(tmp_path, '[gpu_layout:0000:af:00.0]\n' + text)
    assert str(exc.value).startswith(message)


def test_sections_are_read_and_a_misspelt_option_warned(tmp_path):
    conf, path = _load(tmp_path, (
        '[gpu_layout:10de:26b9]\nsriov_vfs = 4\nvgpu_types = 1155\n'
        '[gpu_layout:0000:af:00.0]\nmig_instances = 1g.10gb:2\n'))
    assert sorted(gpu_layout.sections(conf)) == [
        'gpu_layout:0000:af:00.0', 'gpu_layout:10de:26b9']
    assert conf['gpu_layout:10de:26b9'].sriov_vfs == 4
    assert conf['gpu_layout:0000:af:00.0'].mig_instances == {'1g.10gb': 2}
    assert loader.unknown_names(conf) == [
        (path, 5, 'gpu_layout:10de:26b9', 'vgpu_types')]
    # Read without the checks (loader.parse), the sections are known too.
    parsed = loader.parse(['--config-file', path])
    assert loader.unknown_names(parsed) == [
        (path, 5, 'gpu_layout:10de:26b9', 'vgpu_types')]


def test_the_sample_placeholder_declares_nothing(tmp_path):
    repo = __file__.rsplit('/tests/', 1)[0]
    sample = f'{repo}/etc/node-agent/node-agent.conf.sample'
    with open(sample) as f:
        assert '\n[gpu_layout:$device]\n' in f.read()
    conf = loader.parse(['--config-file', sample])
    assert 'gpu_layout:$device' in conf.list_all_sections()
    assert gpu_layout.sections(conf) == []
