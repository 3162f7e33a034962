"""The trio orchestrator: CLI, run loop, bundle freeze, worker supervision, policy, providers, VCS."""
