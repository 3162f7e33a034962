"""orchestrator.worker."""
