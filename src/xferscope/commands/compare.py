"""`compare` subcommand (being written)."""


def register(app):
    pass
