"""Units of cloudvault.restore: prefix rewriting, ELF run paths, env metadata."""
