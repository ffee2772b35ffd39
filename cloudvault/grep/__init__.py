"""`vault grep`: words inside every plain file and archive member of the catalog, read through the verified reader.

pattern.py compiles the pattern (Hyperscan, Python's `re` where Hyperscan cannot express it); lines.py finds the
matching lines of one decoded stream, chunk by chunk; targets.py turns a scope into what to read; run.py reads
archives in parallel worker processes and hands back what matched, secrets redacted, only once it verified.
"""
