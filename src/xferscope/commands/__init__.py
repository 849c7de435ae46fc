"""One module per subcommand; each defines ``register(app)``. Module level imports stay light (no Textual)."""
