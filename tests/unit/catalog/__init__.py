"""Units of cloudvault.catalog: migrations and the records restores and runs leave."""
