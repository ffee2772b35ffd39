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


MAX_HOPS = 40  # as the kernel's ELOOP limit: a loop of links is refused, not followed forever
OUTSIDE, LOOP = "\0outside", "\0loop"  # NUL: never a member path


class LinkChains:
    """The symlinks an archive has created so far, so that later members are judged as extracting them in order
    would see them: `a/b/up -> ..` is harmless alone, but `a/b/x -> up/../..` then leaves the destination, and
    `linkdir/x.txt` is written wherever `linkdir` points."""

    def __init__(self) -> None:
        self._links: dict[str, str] = {}  # where a link sits (its folder resolved) -> its target

    def __bool__(self) -> bool:
        """Whether any symlink was seen: until one is, no member's place depends on those before it."""
        return bool(self._links)

    def _resolve(self, path: str) -> str:
        """path with the links seen so far followed (lexically), relative to the archive's root; OUTSIDE when it
        climbs out of it, LOOP when the links go round."""
        stack: list[str] = []
        todo = list(reversed(path.split("/")))
        hops = 0
        while todo:
            part = todo.pop()
            if part in ("", "."):
                continue
            if part == "..":
                if not stack:
                    return OUTSIDE
                stack.pop()
                continue
            stack.append(part)
            target = self._links.get("/".join(stack))
            if target is not None:
                hops += 1
                if target.startswith("/"):
                    return OUTSIDE
                if hops > MAX_HOPS:
                    return LOOP
                stack.pop()
                todo.extend(reversed(target.split("/")))
        return "/".join(stack)

    def unsafe_reason(self, path: str, kind: str, link: str | None) -> str | None:
        """Why this member, after the links before it, would land or point outside the destination; or None.
        Remembers symlinks (and forgets one that a later member replaces)."""
        if not self._links and kind != "symlink":  # no links yet: nothing to follow ('..' is unsafe_reason's)
            return None
        parent = self._resolve(posixpath.dirname(path))
        if parent in (OUTSIDE, LOOP):
            return "its folder is " + ("a link leading outside the archive" if parent == OUTSIDE else "a loop of links")
        key = posixpath.join(parent, posixpath.basename(path)) if parent else posixpath.basename(path)
        if kind != "symlink" or link is None:
            self._links.pop(key, None)
            return None
        where = self._resolve(posixpath.join(parent, link))  # against the links written before this one
        self._links[key] = link
        if where == OUTSIDE:
            return f"symlink to {link!r} leads outside the archive through the links before it"
        return f"symlink to {link!r} goes round a loop of links" if where == LOOP else None
