"""orchestrator.bundle.inputs."""
