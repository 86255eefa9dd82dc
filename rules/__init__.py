"""Rule data (YAML) shipped with llmtriage; read through importlib.resources."""
