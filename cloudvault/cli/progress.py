"""Progress on a terminal: bytes done of total, the current file, the rate (indexing, extracting)."""

from __future__ import annotations

from rich.console import Console
from rich.progress import (
    BarColumn,
    DownloadColumn,
    Progress,
    TextColumn,
    TimeRemainingColumn,
    TransferSpeedColumn,
)

from cloudvault.progress import Progress as BaseProgress


class RichProgress(BaseProgress):
    def __init__(self, label: str = "indexing") -> None:
        self._bar = Progress(
            TextColumn(f"[bold]{label}"),
            BarColumn(),
            DownloadColumn(),
            TransferSpeedColumn(),
            TimeRemainingColumn(),
            TextColumn("{task.fields[current]}", style="dim"),
            console=Console(stderr=True),
            transient=True,
        )
        self._task = None

    def start(self, total_bytes: int, total_files: int) -> None:
        if self._task is None:
            self._bar.start()
            self._task = self._bar.add_task("index", total=total_bytes, current="")
        else:
            self._bar.update(self._task, total=total_bytes, completed=0)

    def advance(self, nbytes: int) -> None:
        if self._task is not None:
            self._bar.advance(self._task, nbytes)

    def current(self, path: str) -> None:
        if self._task is not None:
            self._bar.update(self._task, current=path[-60:])

    def phase(self, what: str) -> None:
        if self._task is not None:
            self._bar.update(self._task, current=what if len(what) <= 60 else f"{what[:28]}…{what[-31:]}")

    def finish(self) -> None:
        if self._task is not None:
            self._bar.stop()
            self._task = None
