"""The one CPU list parser: kernel lists, specs, and the bound."""

import resource

import pytest

from node_agent.hardware import cpulist


@pytest.mark.parametrize('text, expected', [
    ('0-3,8,10-11', {0, 1, 2, 3, 8, 10, 11}),
    ('5', {5}),
    ('', set()),
    ('0-1\n', {0, 1}),
    ('65535', {65535}),
])
def test_kernel_lists(text, expected):
    assert cpulist.parse(text) == frozenset(expected)


@pytest.mark.parametrize('text', ['3-1', 'a-b', '1,,2', '-1', '0-', '0-3,^2',
                                  '1, 2', '1-2-3', '\u00b2'])
def test_kernel_lists_are_strict(text):
    with pytest.raises(ValueError):
        cpulist.parse(text)


@pytest.mark.parametrize('spec, expected', [
    ('0-3,^2', {0, 1, 3}),
    (' 1 , 5-6 ,^6', {1, 5}),
    ('0-7,^2-3,', {0, 1, 4, 5, 6, 7}),
    ('', set()),
])
def test_specs(spec, expected):
    assert cpulist.parse(spec, spec=True) == frozenset(expected)


@pytest.mark.parametrize('text', ['0-20000000', '0-2000000000', '65536',
                                  '0-99999999999999999999'])
def test_ranges_are_bounded_before_expansion(text):
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with pytest.raises(ValueError, match='above the limit of 65535'):
        cpulist.parse(text)
    # Nothing was expanded: peak memory did not grow by the ~1 GB that
    # 20 million ints would take.
    grown_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
    assert grown_kb < 100 * 1024


def test_a_custom_limit_names_itself():
    with pytest.raises(ValueError, match='8 in .0-8. is above the limit '
                                         'of 7'):
        cpulist.parse('0-8', limit=8)


@pytest.mark.parametrize('cpus, text', [
    ({0, 1, 2, 5}, '0-2,5'),
    ({7}, '7'),
    (set(), ''),
    ({0, 2, 4}, '0,2,4'),
])
def test_to_text_inverts_parse(cpus, text):
    assert cpulist.to_text(cpus) == text
    assert cpulist.parse(text) == frozenset(cpus)


def test_a_long_list_of_repeated_ranges_is_expanded_once():
    """64 KB of ``0-65535,0-65535,...`` (a corrupt or hostile file) is the
    union of its ranges: each id is produced once, never once per part."""
    text = ','.join(['0-65535'] * 8000)
    assert len(text) > 60000
    assert cpulist.parse(text) == frozenset(range(65536))
    assert len(cpulist._expand([(0, 65535)] * 8000)) == 65536
    assert cpulist._expand([(4, 9), (0, 5), (2, 3), (12, 12)]) == [
        0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 12]
    with pytest.raises(ValueError, match='65536'):
        cpulist.parse(text + ',0-65536')
