"""Rules as data: the pydantic rule model, the YAML loader with its pinned errors, the regex safety
check, the JSON rule cache, the data files beside the rules (datafiles) and the verified-fix
record (verified)."""
