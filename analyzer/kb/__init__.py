"""The knowledge base: search over rules, rule and category pages, the static site.

tokens (stemmer, CJK bigrams) < words (rules/kb.yaml: synonyms, category names, page labels)
< search (BM25F + engine signals) | pages (page data) < page_text (terminal) | site (HTML)
< site_check (a built site's sections and links).
"""
