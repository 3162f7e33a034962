"""orchestrator.preflight."""
