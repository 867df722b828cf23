"""node_agent.text: counts in messages."""

from node_agent import text


def test_plural():
    assert text.plural(0, 'consumer') == '0 consumers'
    assert text.plural(1, 'consumer') == '1 consumer'
    assert text.plural(2, 'provider') == '2 providers'
    assert text.plural(1, 'free VF') == '1 free VF'
    assert text.plural(3, 'child', 'children') == '3 children'
