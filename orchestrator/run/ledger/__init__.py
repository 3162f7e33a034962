"""orchestrator.run.ledger."""
