"""Units of cloudvault.tools: GPU fit."""
