"""orchestrator.autotune: kernels that autotune themselves (docs/autotune.md)."""
