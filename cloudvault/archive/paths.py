"""Whether a tar member could write outside its destination: pure checks over its path and link."""

from __future__ import annotations

import posixpath


def unsafe_reason(path: str, kind: str, link: str | None) -> str | None:
    """Why extracting this member as-is could write outside its destination, or None."""
    if path.startswith("/"):
        return "absolute path"
    if ".." in path.split("/"):
        return "'..' in path"
    if kind in ("chardev", "blockdev"):
        return "device file"
    if kind in ("symlink", "hardlink") and link is not None:
        base = posixpath.dirname(path) if kind == "symlink" else ""
        target = posixpath.normpath(posixpath.join(base, link))
        if link.startswith("/") or target == ".." or target.startswith("../"):
            return f"{kind} to {link!r} points outside the archive"
    return None
