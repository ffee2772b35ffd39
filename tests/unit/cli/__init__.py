"""Units of cloudvault.cli: the one grammar and what every command shares."""
