"""`vault restore env`: the lab's Python environments out of the mirror's env archives, at their recorded prefix
or relocated, verified, and never half-written at the target.

A recipe (recipes/env/NAME.toml) names the entry and an archive glob; each folder of an archive the glob finds
that holds conda-meta/ or pyvenv.cfg is one env, named by that folder (envs/NAME; `base` for a conda root holding
other envs), so one archive may hold a whole miniforge tree or several venvs, and a new archive needs no recipe edit.
"""

from __future__ import annotations

import shutil
import sqlite3
from dataclasses import dataclass, replace
from pathlib import Path

from cloudvault import errors
from cloudvault.catalog.lookup import EntryMembers
from cloudvault.catalog.query import resolve_entry
from cloudvault.io.members import MemberReader, read_order
from cloudvault.models import Member
from cloudvault.recipe import ANY, Required, load_recipe
from cloudvault.restore.env import meta as env_meta
from cloudvault.restore.env.results import EnvListed

CHECKS = {ANY: str}
SCHEMA = {
    "description": str,
    "entry": Required(str),  # the mirror entry holding the archives: 015
    "archives": Required(str),  # glob within the entry: data/miniforge3_tar/*.tar.zst
    "root": str,  # the folder the archives were packed from: /mnt/filesystem-h8/miniforge3
    "package_cache": str,  # where the conda package cache lies in the entry (named in the plan)
    "checks": CHECKS,  # name -> command run inside every restored env
    "pitfalls": list,  # printed with every plan and restore
    "envs": {ANY: {"prefix": str, "checks": CHECKS, "pitfalls": list}},
}
MARKER = "conda-meta/vault-restore.json"
SPACE_MARGIN = 1.05  # rewrites and byte-code need a little more than the members' bytes


class EnvNotFound(errors.NotFound):
    """no env {name!r} in recipe {recipe} (entry {entry}){hint}"""


class NotEnoughSpace(errors.EnvironmentProblem):
    """{path} has {free} free; {name} needs about {need}; nothing was written"""


class PrefixUnusable(errors.EnvironmentProblem):
    """cannot create {path} ({why}); restore elsewhere with --prefix PATH or --to ROOT"""


class Unpatched(errors.UsageError):
    """{count} file(s) of {name} cannot move to {prefix}: {files}; pick a shorter prefix or pass --allow-unpatched"""


class ChecksFailed(errors.EnvironmentProblem):
    """{name} is restored at {prefix} but its smoke checks failed: {failed}"""


@dataclass
class EnvSource:
    """One env the recipe finds: its archive (a files row as Member), the folder inside it, the original prefix."""

    name: str
    archive: Member
    folder: str
    prefix: str | None
    mirror_id: int
    entry_id: str
    nested: tuple[str, ...] = ()  # the folders of envs inside this one (a conda root's envs/*): not its members
    problem: str | None = None  # why it cannot be restored at all (its name, its folder)
    shared: str | None = None  # the envs of its name, when others share it: it is then named by `where`

    @property
    def where(self) -> str:
        """The archive's file name and the env's folder in it: how messages tell two envs of one name apart."""
        return f"{self.archive.path.rsplit('/', 1)[-1]}:{self.folder or '.'}"

    def members(self, conn: sqlite3.Connection) -> list[Member]:
        found = EntryMembers(conn, self.mirror_id, self.entry_id, self.archive.path.rsplit("/", 1)[-1]).glob("*")
        inside = self.folder + "/"
        out = [m for m in found if m.file_id == self.archive.file_id and
               (not self.folder or m.path == self.folder or m.path.startswith(inside))]  # fmt: skip
        if self.nested:
            out = [m for m in out if not any(m.path == n or m.path.startswith(n + "/") for n in self.nested)]
        return out


class EnvRecipe:
    """A loaded, validated env recipe and the envs it finds in the catalog."""

    def __init__(self, name: str) -> None:
        self.path, self.data = load_recipe("env", name, SCHEMA)
        self.name = self.path.stem
        self.skipped: list[str] = []  # archives the glob found that are not envs (filled by discover)

    def checks_for(self, env: str) -> dict[str, str]:
        return dict(self.data.get("checks", {})) | dict(self.data.get("envs", {}).get(env, {}).get("checks", {}))

    def pitfalls_for(self, env: str) -> list[str]:
        own = self.data.get("envs", {}).get(env, {}).get("pitfalls", [])
        return [str(p) for p in self.data.get("pitfalls", []) + own]

    def discover(self, conn: sqlite3.Connection) -> list[EnvSource]:
        """Every env of every archive the glob finds, in the archives' order; an env that cannot be restored
        safely (env_problem) is kept with its problem and one whose name others share with the list of them, so
        --list shows every one."""
        mirror_id, entry_id, _ = resolve_entry(conn, self.data["entry"])
        files = EntryMembers(conn, mirror_id, entry_id).glob(self.data["archives"])
        envs: list[EnvSource] = []
        self.skipped = []
        for archive in (f for f in files if f.archive is None and f.type == "file"):
            folders = _env_folders(conn, mirror_id, entry_id, archive)
            if not folders:
                self.skipped.append(f"{archive.path}: no conda-meta/, pyvenv.cfg or bin/python among its members")
                continue
            stem = archive.path.rsplit("/", 1)[-1].removesuffix(".tar.zst")
            for folder in folders:
                nested = tuple(f for f in folders if f != folder and (not folder or f.startswith(folder + "/")))
                own = folder.rsplit("/", 1)[-1] if folder else stem.removeprefix("env-")
                name = "base" if nested else own  # a conda root with its envs inside: conda's own name for it
                problem = env_problem(name, folder)
                prefix = None if problem else self._prefix(name, folder, bool(nested))
                envs.append(EnvSource(name, archive, folder, prefix, mirror_id, entry_id, nested, problem))
        return _shared_names_marked(envs)

    def _prefix(self, name: str, folder: str, tree: bool = False) -> str | None:
        own = self.data.get("envs", {}).get(name, {}).get("prefix")
        if own:
            return own.rstrip("/")
        if "root" in self.data:
            inside = folder or ("" if tree else name)  # a tree packed from the root itself: its base is the root
            return "/".join(p for p in (self.data["root"].rstrip("/"), inside) if p) or "/"
        return "/" + folder if folder else None  # packed with absolute paths (tar -P): the path is the prefix

    def pick(self, envs: list[EnvSource], names: list[str]) -> list[EnvSource]:
        """The envs asked for (all when none named), by name or, for one of several envs of a name, by its
        ARCHIVE:FOLDER (`where`); an unknown name is EnvNotFound with the close names."""
        if not names:
            return envs
        known = list(dict.fromkeys(e.name for e in envs))
        wheres = {e.where: e for e in envs}
        for name in names:
            if name not in known and name not in wheres:
                import difflib

                close = difflib.get_close_matches(name, known, n=3, cutoff=0.4)
                hint = f"; did you mean: {', '.join(close)}" if close else f"; it has: {', '.join(known) or 'none'}"
                raise EnvNotFound(name=name, recipe=self.name, entry=self.data["entry"], hint=hint)
        wanted = set(names)
        by_where = [replace(e, shared=None) if e.where in wanted else e for e in envs]  # named by where: no doubt
        return [e for e in by_where if e.name in wanted or e.where in wanted]  # a conda root before its envs


def env_problem(name: str, folder: str) -> str | None:
    """Why an env cannot be placed by its name or its folder: a name that is not one folder's name (empty, '.',
    '..', holding '/' or NUL, or read as an option: a leading '-'), or a folder that climbs out of where it is
    kept (absolute, '..', NUL): joined under ROOT, either would name ROOT, its parent or a folder outside it."""
    if name in ("", ".", "..") or "/" in name or "\0" in name or name.startswith("-"):
        return f"{name!r} is not a usable env name (empty, '.', '..', '/', NUL or a leading '-')"
    if folder.startswith("/") or "\0" in folder or ".." in folder.split("/"):
        return f"its folder {folder!r} climbs out of where it would be kept (absolute or '..')"
    return None


def _shared_names_marked(envs: list[EnvSource]) -> list[EnvSource]:
    """envs, each whose name another env shares given the list of them (every ARCHIVE:FOLDER of the name)."""
    by_name: dict[str, list[EnvSource]] = {}
    for env in envs:
        by_name.setdefault(env.name, []).append(env)
    for name, same in by_name.items():
        if len(same) > 1:
            folders = ", ".join(e.where for e in same)
            for env in same:
                env.shared = f"env name {name!r} names {len(same)} envs: {folders}"
    return envs


def _env_folders(conn: sqlite3.Connection, mirror_id: int, entry_id: str, archive: Member) -> list[str]:
    """The folders inside the archive that are envs, shallowest first: each holding conda-meta/ or a pyvenv.cfg
    (a conda root and its envs/*, several venvs); else the shallowest holding bin/python."""
    members = EntryMembers(conn, mirror_id, entry_id, archive.path.rsplit("/", 1)[-1])
    found: set[str] = set()
    for pattern, marker, exact in (("*conda-meta/*", "conda-meta/", False), ("*pyvenv.cfg", "pyvenv.cfg", True)):
        for m in members.glob(pattern):
            at = m.path.rfind(marker) if exact else m.path.find(marker)
            if m.file_id != archive.file_id or not (at == 0 or m.path[at - 1 : at] == "/"):
                continue
            if exact and (m.type != "file" or at + len(marker) != len(m.path)):
                continue
            found.add(m.path[:at].rstrip("/"))
    if not found:
        pythons = {m.path[: m.path.find("bin/python")].rstrip("/") for m in members.glob("*bin/python*")
                   if m.file_id == archive.file_id and _at_component(m.path, "bin/python")}  # fmt: skip
        return [min(pythons, key=lambda f: (f.count("/"), f))] if pythons else []
    ordered = sorted(found, key=lambda f: (f.count("/"), f))
    return [f for f in ordered if not any(_inside_files(f, other) for other in ordered if other != f)]


def _at_component(path: str, marker: str) -> bool:
    at = path.find(marker)
    return at == 0 or (at > 0 and path[at - 1] == "/")


def _inside_files(folder: str, env: str) -> bool:
    """Whether folder lies among env's installed files (lib/, pkgs/, share/...), not among its envs/."""
    rest = folder[len(env) + 1 :] if env else folder
    if env and not folder.startswith(env + "/"):
        return False
    return not rest.startswith("envs/")


MARKER_SHAPE = {"required": ("prefix",), "prefix": str, "source": (str, type(None)),
                "source_blake3": (str, type(None)), "original_prefix": (str, type(None)), "moves": list}  # fmt: skip


def read_marker(target: Path) -> dict | None:
    """The marker vault left in an env it restored; None where there is none. One not as vault wrote it (cut
    short, edited) is DamagedFile (5), naming it: an env is never moved from a prefix a damaged marker told."""
    from cloudvault import readers

    try:
        with open(target / MARKER, "rb") as fh:
            data = fh.read()
    except OSError:
        return None
    return readers.json_document(data, target / MARKER, MARKER_SHAPE)


def read_documents(conn: sqlite3.Connection, members: list[Member]) -> dict[str, bytes]:
    """The bytes of small members (conda-meta JSON), read and verified in one forward pass."""
    out = {}
    with MemberReader(conn) as reader:
        for m in read_order(members):
            out[m.path] = b"".join(reader.open(m))
    return out


def conda_meta_members(members: list[Member], folder: str) -> list[Member]:
    meta = f"{folder}/conda-meta/" if folder else "conda-meta/"
    return [m for m in members if m.type == "file" and m.path.startswith(meta) and m.path.endswith(".json")
            and m.path != f"{meta}vault-restore.json"]  # fmt: skip


def free_space(path: Path) -> int:
    """Free bytes where path would be created (its nearest existing folder)."""
    probe = path
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    return shutil.disk_usage(probe).free


def local_caps() -> list[tuple[int, int]]:
    from cloudvault.tools import gpu

    return [g.compute_cap for g in gpu.local_gpus() or []]


def describe(conn: sqlite3.Connection, env: EnvSource, caps: list | None = None) -> EnvListed:
    """What `--list` says of an env, from member names alone: sizes, python, torch build, GPU fit."""

    members = env.members(conn)
    paths = [m.path for m in members]
    torch = env_meta.torch_build(paths)
    return EnvListed(
        name=env.name, where=env.where, problem=env.problem, shared=env.shared, archive=env.archive.path,
        archive_size=env.archive.size, size=sum(m.size for m in members if m.type == "file"),
        files=sum(m.type == "file" for m in members), prefix=env.prefix, python=env_meta.python_version(paths),
        torch=torch, conda_packages=len(conda_meta_members(members, env.folder)),
        gpu=env_meta.gpu_fit(torch, None, caps),
    )  # fmt: skip
