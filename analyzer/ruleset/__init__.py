"""Rules as data: the pydantic rule model, the YAML loader with its pinned errors, the regex safety check and the JSON rule cache."""
