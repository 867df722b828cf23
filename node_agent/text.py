"""Words in messages an operator reads: counts with the right plural,
lists of bounded length, names shown as one printable line."""

# How many names a list in the status line shows before it counts the rest.
SHOWN = 5


def plural(count, word, many=None):
    """``plural(1, 'consumer')`` -> ``'1 consumer'``; ``plural(2,
    'consumer')`` -> ``'2 consumers'``; ``many`` for irregular words."""
    if count == 1:
        return f'{count} {word}'
    return f'{count} {many or word + "s"}'


def printable(value):
    """``value`` as one printable line: every character that is not
    printable (control characters, line and paragraph separators, bidi
    overrides and the other format characters) written as its escape
    (``\\n``, ``\\x1b``, ``\\u202e``).  A name libvirt gives or a reason
    read from a file never puts a second line (a ``STOPPING=1`` for
    systemd) nor a reordering into a log line, the status line or ``tree
    show``."""
    value = str(value)
    if value.isprintable():
        return value
    return ''.join(c if c.isprintable()
                   else c.encode('unicode_escape').decode('ascii')
                   for c in value)


def listed(names, shown=SHOWN):
    """``'a, b, c'``; past ``shown`` names, the first ``shown`` and how
    many more (``'a, b, c, d, e and 95 more'``): a line that names what
    a host holds stays short whatever the host (the full lists are in
    ``tree show`` and the metrics)."""
    names = [printable(n) for n in names]
    if len(names) <= shown:
        return ', '.join(names)
    return ', '.join(names[:shown]) + f' and {len(names) - shown} more'
