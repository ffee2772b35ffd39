"""Docs layer: the README's tour and every page's `$ vault` examples run as written."""
