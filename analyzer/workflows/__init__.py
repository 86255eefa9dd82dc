"""Workflows around triage: `run` wrapper, `watch`, `env` doctor, integrations, reproducer verification and rule example tests."""
