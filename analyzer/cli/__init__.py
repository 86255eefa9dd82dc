"""The click command line: the lazy group in app.py and one module per subcommand area."""
