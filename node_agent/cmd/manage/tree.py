"""tree commands."""


def add_parsers(subparsers):
    pass
