"""The knowledge base: search over rules (stemmer, vocabulary from rules/kb.yaml), pages and the static site."""
