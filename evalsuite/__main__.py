from evalsuite.cli import entry_point

entry_point()
