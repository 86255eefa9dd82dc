"""Findings to output: human/quiet/JSON (render) and SARIF/GitHub (render_ci) renderers, terminal
style (style), their words from rules/report.yaml (texts), baselines (credential redaction is engine/redact.py, applied here at one choke point)."""
