"""`python -m orchestrator.cli` runs the same command line as `tlx-agent`."""

from orchestrator.cli.main import main

raise SystemExit(main())
