"""Walk a mirror and index every file and every member of every .tar.zst into the catalog."""
