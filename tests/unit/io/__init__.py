"""Units of cloudvault.io: the safe writer into a folder."""
