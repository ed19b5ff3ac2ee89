"""One module per subcommand's body, imported only by :mod:`rlhf.cli`."""
