"""A cluster's failed jobs: per-log rows (local pool or Ray), the summary, repeat offenders and unknown clusters."""
