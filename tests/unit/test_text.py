"""node_agent.text: counts in messages."""

from node_agent import text


def test_plural():
    assert text.plural(0, 'consumer') == '0 consumers'
    assert text.plural(1, 'consumer') == '1 consumer'
    assert text.plural(2, 'provider') == '2 providers'
    assert text.plural(1, 'free VF') == '1 free VF'
    assert text.plural(3, 'child', 'children') == '3 children'


def test_printable_escapes_what_would_make_another_line():
    assert text.printable('g1') == 'g1'
    assert text.printable('g1\nSTOPPING=1\r\x1b[2J\u2028\u202eok') == \
        'g1\\nSTOPPING=1\\r\\x1b[2J\\u2028\\u202eok'
    assert text.printable(7) == '7'


def test_listed_names_the_first_few_and_counts_the_rest():
    assert text.listed([]) == ''
    assert text.listed(['a', 'b\n']) == 'a, b\\n'
    assert text.listed(f'g{n}' for n in range(10000)) == \
        'g0, g1, g2, g3, g4 and 9995 more'
