"""The SQLite catalog: schema, opening and locking, bulk writes, and queries."""
