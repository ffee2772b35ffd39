"""Archive access: zstd frame scanning and seeking, tar header parsing; pure functions over byte streams."""
