"""What long operations report as they go; the CLI shows it on a terminal, the library default stays silent."""

from __future__ import annotations


class Progress:
    """No-op base: start(total bytes, total items), advance(bytes), current(name), phase(what), finish().

    phase names work that moves no bytes (writing an archive's members into the catalog and its search index),
    so a bar at 100% still says what it is doing."""

    def start(self, total_bytes: int, total_files: int) -> None: ...

    def advance(self, nbytes: int) -> None: ...

    def current(self, path: str) -> None: ...

    def phase(self, what: str) -> None: ...

    def finish(self) -> None: ...
