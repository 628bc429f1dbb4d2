"""Incremental runs: source globs, keys, stat records and the content-addressed cache store."""
