"""Words in messages an operator reads: counts with the right plural."""


def plural(count, word, many=None):
    """``plural(1, 'consumer')`` -> ``'1 consumer'``; ``plural(2,
    'consumer')`` -> ``'2 consumers'``; ``many`` for irregular words."""
    if count == 1:
        return f'{count} {word}'
    return f'{count} {many or word + "s"}'
