"""Findings to output: ranking helpers, human/JSON/SARIF/GitHub renderers, credential redaction, baselines."""
