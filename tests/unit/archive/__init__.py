"""Units of cloudvault.archive: zstd frames, tar headers, the scan."""
