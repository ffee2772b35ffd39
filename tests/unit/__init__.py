"""Unit layer: the package's modules called directly, laid out as cloudvault/ is."""
