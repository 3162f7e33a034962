"""orchestrator.decision."""
