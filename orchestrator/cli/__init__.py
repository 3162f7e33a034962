"""The `tlx-agent` command line: argument parsing and output only, one module per subcommand."""

from orchestrator.cli.main import main

__all__ = ["main"]
