"""The mounted tree, built from the catalog alone: plain files as they are in the mirror, each indexed `.tar.zst`
also a folder of its members (ratarmount's `--recursive` shape).

The archive file keeps its bytes readable at `NAME.tar.zst.raw` (looked up by name, not listed, so `grep -r` and
`cp -r` read each member once, not once more as compressed bytes). Sizes, modes, mtimes and link targets come
from the catalog: listing and stat never open the mirror. Members are laid out as `tar -x` would leave them: a
later member of the same path (an appended update) wins, a hardlink shows its target's data as it was at the
link's place, folders a member implies exist even without their own header.
"""

from __future__ import annotations

import sqlite3
import stat
import threading

from cloudvault.archive.paths import MAX_HOPS
from cloudvault.models import Member

RAW_SUFFIX = ".raw"
TYPE_BITS = {"file": stat.S_IFREG, "hardlink": stat.S_IFREG, "symlink": stat.S_IFLNK, "dir": stat.S_IFDIR,
             "fifo": stat.S_IFIFO, "chardev": stat.S_IFCHR, "blockdev": stat.S_IFBLK}  # fmt: skip
MEMBER_COLUMNS = (
    "SELECT ?, ?, mb.path, mb.raw_path, mb.type, mb.size, mb.mode, mb.mtime, mb.blake3, mb.link_target, ?, ?, "
    "mb.data_offset, mb.raw_link_target, mb.sparse_map FROM members mb WHERE mb.archive_id = ? ORDER BY mb.data_offset"
)


class Node:
    """One path of the mount. data: the Member whose bytes a read returns (a hardlink's: its target's), None for
    folders, links and devices; flag: why the catalog flagged it (a secret), else None."""

    __slots__ = ("mode", "size", "mtime_ns", "link_target", "data", "children", "flag")

    def __init__(self, mode: int, size: int = 0, mtime_ns: int = 0, link_target: str | None = None,
                 data: Member | None = None, flag: str | None = None) -> None:  # fmt: skip
        self.mode, self.size, self.mtime_ns, self.link_target = mode, size, mtime_ns, link_target
        self.data, self.flag = data, flag
        self.children: dict[str, Node] | None = {} if stat.S_ISDIR(mode) else None

    @property
    def is_dir(self) -> bool:
        return self.children is not None


def folder(mtime_ns: int = 0) -> Node:
    return Node(stat.S_IFDIR | 0o555, mtime_ns=mtime_ns)


class Tree:
    """Every path of the mount, by its path from the mount's root ('/' is the root).

    An archive's members are read from the catalog when a path at or under its folder is first looked up, not
    at mount time (an archive of 200k members costs seconds to lay out); lock serializes those loads and every
    other use of conn (the FUSE threads share one connection).
    """

    def __init__(self, conn: sqlite3.Connection | None = None) -> None:
        self.root = folder()
        self.nodes: dict[str, Node] = {"/": self.root}
        self.conn = conn
        self.lock = threading.Lock()
        self.unloaded: dict[str, tuple] = {}  # archive folder path -> what _add_members needs

    def lookup(self, path: str) -> Node | None:
        node = self.nodes.get(path)
        if self.unloaded and (node is None or path in self.unloaded):
            self._load_at_or_above(path)
            node = self.nodes.get(path)
        return node

    def _load_at_or_above(self, path: str) -> None:
        while path:
            if path in self.unloaded:
                with self.lock:
                    args = self.unloaded.get(path)
                    if args is not None:  # not loaded by another thread meanwhile
                        _add_members(self.conn, self, path, *args)
                        del self.unloaded[path]
                return
            path = path.rpartition("/")[0]

    def place(self, path: str, node: Node, listed: bool = True) -> None:
        """node at path (a later one replaces an earlier, as tar -x does; a folder keeps what it holds)."""
        parent_path, _, name = path.rpartition("/")
        parent = self.folder_at(parent_path or "/")
        old = self.nodes.get(path)
        if old is not None and old.is_dir and node.is_dir:
            old.mode, old.mtime_ns = node.mode, node.mtime_ns or old.mtime_ns
            return
        self.nodes[path] = node
        if listed:
            parent.children[name] = node

    def folder_at(self, path: str) -> Node:
        """The folder at path, made (with those above it) if missing; a file in the way is replaced."""
        node = self.nodes.get(path)
        if node is not None and node.is_dir:
            return node
        parent_path, _, name = path.rpartition("/")
        parent = self.folder_at(parent_path or "/")
        node = parent.children[name] = self.nodes[path] = folder()
        return node


def build_tree(conn: sqlite3.Connection, mirror_id: int | None = None, entry_id: str | None = None) -> Tree:
    """The tree of every mirror in the catalog (each under its root folder's name), or of one entry (at the root)."""
    tree = Tree(conn)
    for mid, top in mirror_folders(conn).items():
        if mirror_id is None or mid == mirror_id:
            _add_mirror(conn, tree, mid, "" if entry_id is not None else f"/{top}", entry_id)
    return tree


def mirror_folders(conn: sqlite3.Connection) -> dict[int, str]:
    """mirror id -> its folder at the mount's root: its root folder's name, or its catalog name where two
    mirrors' roots share a name."""
    mirrors = conn.execute("SELECT id, name, root FROM mirrors ORDER BY id").fetchall()
    tops = [root.rstrip("/").rsplit("/", 1)[-1] or name for _, name, root in mirrors]
    return {mid: top if tops.count(top) == 1 else name for (mid, name, _), top in zip(mirrors, tops, strict=True)}


def mount_path(member: Member, folders: dict[int, str]) -> str:
    """Where member is in a mount of the whole catalog (relative to its root)."""
    top = folders[member.mirror_id]
    if member.archive:
        return f"{top}/{member.archive}/{member.path.strip('/')}"
    return f"{top}/{member.entry_id}/{member.path}" if member.entry_id else f"{top}/{member.path}"


def _add_mirror(conn: sqlite3.Connection, tree: Tree, mirror_id: int, prefix: str, entry_id: str | None) -> None:
    where, args = ("AND f.entry_id = ?", [entry_id]) if entry_id is not None else ("", [])
    strip = len(entry_id) + 1 if entry_id else 0
    if prefix:
        tree.folder_at(prefix)
    secrets = _secrets(conn, mirror_id)
    rows = conn.execute(
        "SELECT f.id, f.entry_id, f.path, f.raw_path, f.kind, f.size, f.mode, f.mtime_ns, f.blake3, f.link_target, "
        f"a.id, a.status FROM files f LEFT JOIN archives a ON a.file_id = f.id WHERE f.mirror_id = ? {where} "
        "ORDER BY f.path",
        [mirror_id, *args],
    ).fetchall()
    for file_id, entry, path, raw, kind, size, mode, mtime_ns, b3, target, archive_id, status in rows:
        at = f"{prefix}/{path[strip:]}"
        flag = secrets.get((file_id, None))
        if kind == "symlink":
            tree.place(at, Node(stat.S_IFLNK | 0o777, len(target or ""), mtime_ns, target or ""))
            continue
        plain = Member(mirror_id, entry, path, raw, "file", size, mode, mtime_ns // 10**9, b3, None, None, file_id, 0)
        node = Node(stat.S_IFREG | (mode & 0o7777), size, mtime_ns, data=plain, flag=flag)
        if archive_id is None or status != "ok":
            tree.place(at, node)
            continue
        tree.place(at + RAW_SUFFIX, node, listed=False)
        tree.place(at, folder(mtime_ns))
        tree.unloaded[at] = ((mirror_id, entry, path, file_id, archive_id), secrets)


def _secrets(conn: sqlite3.Connection, mirror_id: int) -> dict[tuple[int, str | None], str]:
    sql = "SELECT file_id, member, detail FROM flags WHERE mirror_id = ? AND kind = 'secret'"
    rows = conn.execute(sql, (mirror_id,))
    return {(file_id, member): f"secret: {detail}" for file_id, member, detail in rows}


def _add_members(conn: sqlite3.Connection, tree: Tree, at: str, archive: tuple, secrets: dict) -> None:
    """The members of one archive under the folder at `at`, in stored order (so later ones win, as with tar -x)."""
    mirror_id, entry, archive_path, file_id, archive_id = archive
    seen: dict[str, Member] = {}  # path -> the last member stored at it so far: what a hardlink there names
    for row in conn.execute(MEMBER_COLUMNS, (mirror_id, entry, archive_path, file_id, archive_id)):
        member = Member(*row)
        path = member.path.strip("/")
        if not path or path == "." or ".." in path.split("/"):
            continue  # an unsafe or empty name: extract refuses it, the mount does not show it
        bits = TYPE_BITS.get(member.type)
        if bits is None:
            continue
        mtime_ns = member.mtime * 10**9
        flag = secrets.get((file_id, member.path))
        if member.type == "dir":
            node = Node(bits | (member.mode & 0o7777) | 0o500, mtime_ns=mtime_ns)
        elif member.type == "symlink":
            node = Node(bits | 0o777, len(member.link_target or ""), mtime_ns, member.link_target or "")
        elif member.type in ("file", "hardlink"):
            data = _link_data(member, seen)
            if data is None:
                continue  # a hardlink to nothing stored before it: nothing to read
            node = Node(bits | (member.mode & 0o7777), data.size, mtime_ns, data=data, flag=flag)
        else:
            node = Node(bits | (member.mode & 0o7777), mtime_ns=mtime_ns)
        seen[path] = member
        tree.place(f"{at}/{path}", node)


def _link_data(member: Member, seen: dict[str, Member]) -> Member | None:
    """The file member whose bytes member holds: itself, or a hardlink's target as stored before it."""
    data = member
    for _ in range(MAX_HOPS):
        if data.type != "hardlink":
            return data if data.type == "file" else None
        data = seen.get((data.link_target or "").strip("/"))
        if data is None:
            return None
    return None
