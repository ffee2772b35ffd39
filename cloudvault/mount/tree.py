"""The mounted tree, built from the catalog alone: plain files as they are in the mirror, each indexed `.tar.zst`
also a folder of its members (ratarmount's `--recursive` shape).

The archive file keeps its bytes readable at `NAME.tar.zst.raw` (looked up by name, not listed, so `grep -r` and
`cp -r` read each member once, not once more as compressed bytes). Sizes, modes, mtimes and link targets come
from the catalog: listing and stat never open the mirror. An archive's members are looked up in the catalog one
path at a time (its index on archive and path), never laid out whole: the first look into an archive of 200,000
members costs a query, not seconds and a tree in memory. Members are laid out as `tar -x` would leave them: a
later member of the same path (an appended update) wins, a hardlink shows its target's data as it was at the
link's place, folders a member implies exist even without their own header.
"""

from __future__ import annotations

import sqlite3
import stat
import threading
from collections import OrderedDict
from collections.abc import Callable

from cloudvault.archive.paths import MAX_HOPS
from cloudvault.catalog import tree_rows
from cloudvault.catalog.lookup import member_before
from cloudvault.models import Member

RAW_SUFFIX = ".raw"
TYPE_BITS = {"file": stat.S_IFREG, "hardlink": stat.S_IFREG, "symlink": stat.S_IFLNK, "dir": stat.S_IFDIR,
             "fifo": stat.S_IFIFO, "chardev": stat.S_IFCHR, "blockdev": stat.S_IFBLK}  # fmt: skip
KEPT_NODES = 4096  # member nodes kept per archive, most recently used: the kernel caches the rest itself


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
    """Every path of the mount, by its path from the mount's root ('/' is the root): plain files, archive files and
    the folders above them in nodes; what is inside an archive's folder asked of its ArchiveFolder. lock
    serializes every use of conn (the FUSE threads share one connection)."""

    def __init__(self, conn: sqlite3.Connection | None = None) -> None:
        self.root = folder()
        self.nodes: dict[str, Node] = {"/": self.root}
        self.conn = conn
        self.lock = threading.Lock()
        self.archives: dict[str, ArchiveFolder] = {}  # archive folder path -> its members

    def lookup(self, path: str) -> Node | None:
        node = self.nodes.get(path)
        if node is not None:
            return node
        archive, rest = self._archive_of(path)
        return archive.lookup(rest) if archive is not None else None

    def kept(self, path: str) -> Node | None:
        """The node at path if it is at hand without asking the catalog: a plain node, or one an archive folder's
        listing kept; else None."""
        node = self.nodes.get(path)
        if node is not None:
            return node
        archive, rest = self._archive_of(path)
        return archive.kept(rest) if archive is not None else None

    def names(self, path: str) -> list[str]:
        """The names inside the folder at path (empty if it is none)."""
        archive, rest = self._archive_of(path)
        if archive is not None:
            return archive.names(rest)
        node = self.nodes.get(path)
        return list(node.children) if node is not None and node.is_dir else []

    def _archive_of(self, path: str) -> tuple[ArchiveFolder | None, str]:
        """The archive whose folder holds path (or is it), and path inside it ('' for the folder itself)."""
        if not self.archives:
            return None, ""
        at = path
        while at:
            found = self.archives.get(at)
            if found is not None:
                return found, path[len(at) + 1 :]
            at = at.rpartition("/")[0]
        return None, ""

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


class ArchiveFolder:
    """One indexed archive as a folder: each path inside it looked up in the catalog when first asked for (the
    last KEPT_NODES kept), its listing asked of the catalog too."""

    def __init__(self, tree: Tree, archive: Member, archive_id: int, secrets: dict) -> None:
        self.tree, self.archive, self.archive_id, self.secrets = tree, archive, archive_id, secrets
        self._kept: OrderedDict[str, Node | None] = OrderedDict()

    def names(self, rest: str) -> list[str]:
        """The names in the folder rest; a folder of at most KEPT_NODES members is read in one query and its
        children's nodes kept, so the lookups that follow a listing (`ls -l`, `grep -r`) ask nothing more."""
        with self.tree.lock:
            conn = self.tree.conn
            under = tree_rows.members_under(conn, self.archive_id, rest, self.archive, KEPT_NODES)
            if under is None:
                return tree_rows.names_under(conn, self.archive_id, rest)
            exact: dict[str, list[Member]] = {}
            last_under: dict[str, int] = {}
            for member in under:
                path = member.path.strip("/")
                name, _, deeper = (path[len(rest) + 1 :] if rest else path).partition("/")
                if deeper:
                    last_under[name] = member.data_offset  # stored order: the last one stays
                else:
                    exact.setdefault(name, [])
                    exact[name].append(member)
            names = []
            for name in sorted(exact.keys() | last_under.keys()):
                last = last_under.get(name, -1)
                node = self._pick(exact.get(name, []), lambda after, last=last: last > after)
                if node is not None and name not in (".", ".."):
                    self._keep(f"{rest}/{name}" if rest else name, node)
                    names.append(name)
            return names

    def kept(self, rest: str) -> Node | None:
        """The node at rest if a listing or lookup kept it (None: not kept, or nothing there)."""
        with self.tree.lock:
            return self._kept.get(rest)

    def lookup(self, rest: str) -> Node | None:
        with self.tree.lock:
            if rest in self._kept:
                self._kept.move_to_end(rest)
                return self._kept[rest]
            conn = self.tree.conn
            exact = tree_rows.members_at(conn, self.archive_id, rest, self.archive)
            node = self._pick(exact, lambda after: tree_rows.any_under(conn, self.archive_id, rest, after))
            self._keep(rest, node)
            return node

    def _keep(self, rest: str, node: Node | None) -> None:
        self._kept[rest] = node
        self._kept.move_to_end(rest)
        if len(self._kept) > KEPT_NODES:
            self._kept.popitem(last=False)

    def _pick(self, exact: list[Member], under_after: Callable[[int], bool]) -> Node | None:
        """The node tar -x leaves at a path from the members stored there (exact, in stored order): the last that
        shows (a hardlink to nothing stored before it does not), unless a member stored after it under the path
        (under_after(offset)) made it a folder again."""
        for member in reversed(exact):
            if member.type != "dir" and under_after(member.data_offset):
                return folder()
            node = self._member_node(member)
            if node is not None:
                return node
        return folder() if under_after(-1) else None

    def _member_node(self, member: Member) -> Node | None:
        bits = TYPE_BITS[member.type]
        mtime_ns = member.mtime * 10**9
        if member.type == "dir":
            return Node(bits | (member.mode & 0o7777) | 0o500, mtime_ns=mtime_ns)
        if member.type == "symlink":
            return Node(bits | 0o777, len(member.link_target or ""), mtime_ns, member.link_target or "")
        if member.type in ("file", "hardlink"):
            data = self._link_data(member)
            if data is None:
                return None  # a hardlink to nothing stored before it: nothing to read
            flag = self.secrets.get((self.archive.file_id, member.path))
            return Node(bits | (member.mode & 0o7777), data.size, mtime_ns, data=data, flag=flag)
        return Node(bits | (member.mode & 0o7777), mtime_ns=mtime_ns)

    def _link_data(self, member: Member) -> Member | None:
        """The file member whose bytes member holds: itself, or a hardlink's target as stored before it."""
        data = member
        for _ in range(MAX_HOPS):
            if data.type != "hardlink":
                return data if data.type == "file" else None
            data = member_before(self.tree.conn, data.file_id, (data.link_target or "").strip("/"), data.data_offset)
            if data is None:
                return None
        return None


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
    rows = tree_rows.mirrors(conn)
    tops = [r["root"].rstrip("/").rsplit("/", 1)[-1] or r["name"] for r in rows]
    return {r["id"]: top if tops.count(top) == 1 else r["name"] for r, top in zip(rows, tops, strict=True)}


def mount_path(member: Member, folders: dict[int, str]) -> str:
    """Where member is in a mount of the whole catalog (relative to its root)."""
    top = folders[member.mirror_id]
    if member.archive:
        return f"{top}/{member.archive}/{member.path.strip('/')}"
    return f"{top}/{member.entry_id}/{member.path}" if member.entry_id else f"{top}/{member.path}"


def _add_mirror(conn: sqlite3.Connection, tree: Tree, mirror_id: int, prefix: str, entry_id: str | None) -> None:
    strip = len(entry_id) + 1 if entry_id else 0
    if prefix:
        tree.folder_at(prefix)
    secrets = {key: f"secret: {detail}" for key, detail in tree_rows.secret_flags(conn, mirror_id).items()}
    for row in tree_rows.mirror_files(conn, mirror_id, entry_id):
        at = f"{prefix}/{row['path'][strip:]}"
        flag = secrets.get((row["id"], None))
        if row["kind"] == "symlink":
            target = row["link_target"] or ""
            tree.place(at, Node(stat.S_IFLNK | 0o777, len(target), row["mtime_ns"], target))
            continue
        plain = Member(mirror_id, row["entry_id"], row["path"], row["raw_path"], "file", row["size"], row["mode"],
                       row["mtime_ns"] // 10**9, row["blake3"], None, None, row["id"], 0)  # fmt: skip
        node = Node(stat.S_IFREG | (row["mode"] & 0o7777), row["size"], row["mtime_ns"], data=plain, flag=flag)
        if row["archive_id"] is None or row["archive_status"] != "ok":
            tree.place(at, node)
            continue
        tree.place(at + RAW_SUFFIX, node, listed=False)
        tree.place(at, folder(row["mtime_ns"]))
        tree.archives[at] = ArchiveFolder(tree, plain._replace(archive=row["path"]), row["archive_id"], secrets)
