"""What a re-index must do: pure comparison of a fresh walk with what the catalog holds."""

from __future__ import annotations

from dataclasses import dataclass, field

from cloudvault.archive.zip import is_zip_name
from cloudvault.models import FileStat


@dataclass
class Plan:
    new: list[FileStat] = field(default_factory=list)
    changed: list[FileStat] = field(default_factory=list)
    unchanged: list[FileStat] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)

    @property
    def to_read(self) -> list[FileStat]:
        return self.new + self.changed


def plan_index(walked: list[FileStat], known: dict[str, tuple[int, int, int, int]]) -> Plan:
    """Unchanged: same (size, mtime, inode, ctime) as the catalog recorded."""
    plan = Plan()
    seen = set()
    for st in walked:
        seen.add(st.path)
        old = known.get(st.path)
        if old is None:
            plan.new.append(st)
        elif old != st.signature:
            plan.changed.append(st)
        else:
            plan.unchanged.append(st)
    plan.deleted = sorted(set(known) - seen)
    return plan


def is_archive(path: str) -> bool:
    return path.endswith(".tar.zst") or is_zip_name(path)


def listing_for(path: str) -> str:
    """The member listing that the lab keeps beside an archive."""
    return path + ".list"
