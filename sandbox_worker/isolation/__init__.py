"""sandbox_worker.isolation.layers."""
