"""db commands."""


def add_parsers(subparsers):
    pass
