"""The fault suite: hostile inputs, corruptions, kills and bad arguments (issue 8)."""
