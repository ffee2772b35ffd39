"""A run's per-request rows kept as columns, so that compare holds a serving benchmark's 300,000 requests in tens
of megabytes and judges them with array arithmetic.

RequestTable is a Mapping request key -> row dict, as results.parse always gave: a row is made when it is asked
for. Underneath, each numeric column is a float array (NaN: an empty cell), a column of canonical integers
(`idx`) an int64 array, a column of few values (role, gpu, finish) int32 codes into its values (Categories), and
doc_id is not kept at all: it is the request key less its `@gpu<N>`. requests.jsonl's fields (output_ids,
top2_margin, the timings recomputed from timestamps) are laid over the table's columns. `from_csv` reads
per_request.csv with str.split, a chunk at a time, when the file has no quoted cell, no carriage return and
nothing to complain about; otherwise it answers None and the validating reader (readers.csv_table) reads the file
and names what is wrong.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator, Mapping, Sequence
from itertools import repeat

import numpy as np

CHUNK_BYTES = 1 << 21  # bytes decoded and split at a time: the cells of one chunk are the parse's only per-cell strings
FEW = 4096  # a text column with more distinct values than this keeps its strings unshared


class RequestTable(Mapping):
    """Per-request rows of one run, as columns (see the module's docstring); `requests`: the keys in file order."""

    def __init__(self, header: list[str], keys: list[str], numbers: dict, integral: set, texts: dict) -> None:
        self.header, self.requests, self.numbers, self.integral, self.texts = header, keys, numbers, integral, texts
        self.index = {k: i for i, k in enumerate(keys)}
        self.extra: dict[int, dict] = {}  # row -> fields laid over it from requests.jsonl
        self._positions: tuple[object, np.ndarray] | None = None
        self._measured: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.requests)

    def __iter__(self) -> Iterator[str]:
        return iter(self.requests)

    def __contains__(self, key: object) -> bool:
        return key in self.index

    def __getitem__(self, key: str) -> dict:
        return self.row(self.index[key])

    def row(self, i: int) -> dict:
        """Row i as the dict the validating reader makes of it."""
        row: dict = {}
        for name in self.header:
            if name == "doc_id":
                row[name] = self._doc_id(i)
            elif name in self.numbers:
                v = self.numbers[name][i]
                row[name] = None if v != v else int(v) if name in self.integral else float(v)
            elif (text := self.texts[name][i]) is not None:
                row[name] = str(text) if isinstance(self.texts[name], np.ndarray) else text
        for name, column in self.numbers.items():
            if name not in self.header and column[i] == column[i]:
                row[name] = float(column[i])
        row.update(self.extra.get(i, {}))
        return row

    def _doc_id(self, i: int) -> str | None:
        gpu = self.texts["gpu"][i]
        return None if gpu is None else self.requests[i][: len(self.requests[i]) - len(f"@gpu{gpu}")]

    def add_request(self, key: str, fields: dict) -> int:
        """A request only requests.jsonl has: a new row, its CSV cells empty."""
        self.index[key] = len(self.requests)
        self.requests.append(key)
        for name in self.numbers:
            self.numbers[name] = np.append(self.numbers[name], np.nan)
        for name, column in self.texts.items():
            self.texts[name] = _with_none(column)
        self.extra[len(self.requests) - 1] = dict(fields)
        self._positions = self._measured = None
        return len(self.requests) - 1

    def set_number(self, i: int, name: str, value: float) -> None:
        if name not in self.numbers:
            self.numbers[name] = np.full(len(self.requests), np.nan)
        self.numbers[name][i] = value
        self.integral.discard(name)

    def positions(self, keys: Sequence[str]) -> np.ndarray:
        """Each key's row (-1 where the run lacks it); the last answer is kept (a comparison asks per metric)."""
        if self._positions is None or self._positions[0] is not keys:
            found = np.fromiter((self.index.get(k, -1) for k in keys), np.int64, len(keys))
            self._positions = (keys, found)
        return self._positions[1]

    def measured_mask(self) -> np.ndarray:
        """Per row: role measured (an empty or absent role is measured)."""
        if self._measured is None:
            roles = self.texts.get("role")
            if roles is None:
                self._measured = np.ones(len(self.requests), bool)
            elif isinstance(roles, Categories):
                self._measured = roles.apply(lambda r: (r or "measured") == "measured", bool)
            else:
                self._measured = np.fromiter(((r or "measured") == "measured" for r in roles), bool, len(roles))
        return self._measured

    def measured_keys(self) -> list[str]:
        return [k for k, m in zip(self.requests, self.measured_mask(), strict=True) if m]

    def number(self, name: str) -> np.ndarray:
        """A numeric column (NaN where empty or not recorded)."""
        return self.numbers.get(name, np.full(len(self.requests), np.nan))

    def metric_values(self, keys: Sequence[str], metric: str, *, measured_only: bool = False) -> np.ndarray:
        """repro.timings.value of each request in keys, NaN where missing (or not measured, with measured_only)."""
        from cloudvault.repro.timings import METRICS

        at = self.positions(keys)
        column = self.number(METRICS[metric][0])
        if metric == "throughput":
            out, e2e = self.number("output_tokens"), self.number("e2e_s")
            with np.errstate(divide="ignore", invalid="ignore"):
                derived = np.where(e2e > 0, out / e2e, np.nan)
            column = np.where(np.isnan(column), derived, column)
        found = np.where(at >= 0, column[at], np.nan)
        if measured_only:
            found = np.where((at >= 0) & self.measured_mask()[at], found, np.nan)
        return np.where(np.isfinite(found), found, np.nan)

    def recorded(self, name: str) -> np.ndarray:
        """Per row: the row has a value in this column (what `row.get(name) is not None` says)."""
        if name in self.numbers:
            return ~np.isnan(self.numbers[name])
        if isinstance(self.texts.get(name), Categories):
            return self.texts[name].codes >= 0
        if name in self.texts:
            return np.fromiter((v is not None for v in self.texts[name]), bool, len(self.requests))
        if name == "doc_id" and "doc_id" in self.header:
            return self.recorded("gpu")
        return np.fromiter((self.extra.get(i, {}).get(name) is not None for i in range(len(self.requests))), bool,
                           len(self.requests))  # fmt: skip

    def exact_values(self, name: str, normal) -> list | np.ndarray:
        """The column's values as compare's exact rule sees them (normal: compare._value), row by row."""
        if name in self.numbers:
            return self.numbers[name]
        if name in self.texts:
            column = self.texts[name]
            if isinstance(column, np.ndarray):
                return column.astype(float)
            if isinstance(column, Categories):
                return column.apply(lambda v: None if v is None else normal(v))
            seen: dict = {}
            return [seen[v] if v in seen else seen.setdefault(v, normal(v)) for v in column]
        if name == "doc_id":
            return [normal(self._doc_id(i)) for i in range(len(self.requests))]
        laid = (self.extra.get(i, {}).get(name) for i in range(len(self.requests)))
        return [None if v is None else normal(v) for v in laid]


def _with_none(column) -> list | Categories:
    """A text column one row longer, the new row without a cell."""
    if isinstance(column, Categories):
        return Categories(column.values, np.append(column.codes, -1))
    if isinstance(column, np.ndarray):
        return [*(str(v) for v in column), None]
    return [*column, None]


class Categories(Sequence):
    """A text column of few distinct values (role, gpu, finish): a code per row into values; -1: no cell."""

    def __init__(self, values: list[str], codes: np.ndarray) -> None:
        self.values, self.codes = values, codes

    def __len__(self) -> int:
        return len(self.codes)

    def __getitem__(self, i: int) -> str | None:
        code = self.codes[i]
        return None if code < 0 else self.values[code]

    def __iter__(self) -> Iterator[str | None]:
        lookup = [*self.values, None]  # code -1 is the last: no cell
        return (lookup[c] for c in self.codes.tolist())

    def apply(self, func, dtype=object) -> np.ndarray:
        """func of each row's value, computed once per distinct value."""
        found = np.empty(len(self.values) + 1, dtype=dtype)
        found[:] = [func(v) for v in [*self.values, None]]
        return found[self.codes]


def from_csv(data: bytes, required: tuple[str, ...], numeric: tuple[str, ...]) -> RequestTable | None:
    """per_request.csv as a RequestTable keyed by doc_id@gpu<gpu>, or None when the validating reader must read it
    (a quoted cell, a carriage return, bytes that are not UTF-8, a missing column, a short row, a cell that is not a
    finite number, a request twice): that reader then names what is wrong, or reads what this pass does not."""
    if b'"' in data or b"\r" in data:
        return None
    head = data.find(b"\n") if b"\n" in data else len(data)
    try:
        header = data[:head].decode("utf-8").split(",")
    except UnicodeDecodeError:
        return None
    if any(c not in header for c in required) or len(set(header)) != len(header):
        return None
    columns = {name: _Column(name in numeric) for name in header if name != "doc_id"}
    where = {name: i for i, name in enumerate(header)}
    keys: list[str] = []
    for cells in _chunks(data, head + 1, len(header)):
        if cells is None:
            return None
        parts = {name: cells[i :: len(header)] for name, i in where.items()}
        if any(not columns[name].add(part) for name, part in parts.items() if name != "doc_id"):
            return None
        # interned: A, B and the baselines share one string per request key, not one each
        keys += map(sys.intern, [f"{d}@gpu{g}" for d, g in zip(parts["doc_id"], parts["gpu"], strict=True)])
    numbers = {name: c.numbers() for name, c in columns.items() if c.numeric}
    integral = {name for name, c in columns.items() if c.numeric and c.whole}
    texts = {name: c.text_column() for name, c in columns.items() if not c.numeric}
    table = RequestTable(header, keys, numbers, integral, texts)
    return table if len(table.index) == len(keys) else None


def _chunks(data: bytes, start: int, width: int) -> Iterator[list[str] | None]:
    """The cells of the rows from start on, row after row, about CHUNK_BYTES at a time (whole lines, decoded one
    chunk at a time; blank lines skipped as csv skips them); None for a chunk that is not UTF-8 or has a row
    without `width` cells."""
    while start < len(data):
        end = data.find(b"\n", start + CHUNK_BYTES)
        end = len(data) if end < 0 else end
        try:
            lines = data[start:end].decode("utf-8").split("\n")
        except UnicodeDecodeError:
            yield None
            return
        start = end + 1
        if "" in lines:
            lines = [line for line in lines if line]
        if set(map(str.count, lines, repeat(","))) - {width - 1}:
            yield None
            return
        if lines:
            yield ",".join(lines).split(",")


class _Column:
    """One column of per_request.csv, taken a chunk of cells at a time: numbers as float arrays (whole: every cell
    written as an integer), text as canonical integers (`idx`) while every cell is one, else strings shared
    between rows while there are few distinct ones."""

    def __init__(self, numeric: bool) -> None:
        self.numeric, self.whole = numeric, True
        self.pieces: list[np.ndarray] = []
        self.texts: list[list | np.ndarray] = []  # per chunk: canonical integers, codes, or strings
        self.codes: dict[str, int] | None = {}

    def add(self, cells: list[str]) -> bool:
        """Take a chunk; False for a numeric cell that is not a finite number (the validating reader names it)."""
        if not self.numeric:
            self.texts.append(self._text(cells))
            return True
        try:
            self.pieces.append(np.fromiter(map(int, cells), np.int64, len(cells)).astype(float))
            return True
        except (ValueError, OverflowError):
            self.whole = False
        try:
            found = np.fromiter((float(c) if c else np.nan for c in cells), float, len(cells))
        except ValueError:
            return False
        if np.isinf(found).any() or np.count_nonzero(np.isnan(found)) != cells.count(""):
            return False
        self.pieces.append(found)
        return True

    def _text(self, cells: list[str]) -> list | np.ndarray:
        if all(isinstance(p, np.ndarray) and p.dtype == np.int64 for p in self.texts):
            try:
                ints = np.fromiter(map(int, cells), np.int64, len(cells))
                if list(map(str, ints.tolist())) == cells:
                    return ints
            except (ValueError, OverflowError):
                pass
        if self.codes is not None:
            for value in set(cells) - self.codes.keys():
                self.codes[value] = len(self.codes)
            if len(self.codes) <= FEW:
                return np.fromiter(map(self.codes.__getitem__, cells), np.int32, len(cells))
            lookup = {code: value for value, code in self.codes.items()}
            self.texts = [p if isinstance(p, list) else _decoded(p, lookup) for p in self.texts]
            self.codes = None  # many distinct values: the strings themselves
        return cells

    def numbers(self) -> np.ndarray:
        return np.concatenate(self.pieces) if self.pieces else np.empty(0)

    def text_column(self) -> list | np.ndarray | Categories:
        if self.texts and all(isinstance(p, np.ndarray) and p.dtype == np.int64 for p in self.texts):
            return np.concatenate(self.texts)
        if self.codes is not None:
            values = sorted(self.codes, key=self.codes.__getitem__)
            pieces = [p if p.dtype == np.int32 else _coded(p, self.codes) for p in self.texts]
            return Categories(values, np.concatenate(pieces) if pieces else np.empty(0, np.int32))
        return [c for p in self.texts for c in p]


def _coded(ints: np.ndarray, codes: dict[str, int]) -> np.ndarray:
    """Canonical integers of the first chunks as codes, once a later chunk held other text."""
    for value in {str(v) for v in ints.tolist()} - codes.keys():
        codes[value] = len(codes)
    return np.fromiter((codes[str(v)] for v in ints.tolist()), np.int32, len(ints))


def _decoded(piece: np.ndarray, lookup: dict[int, str]) -> list[str]:
    return [str(v) for v in piece.tolist()] if piece.dtype == np.int64 else [lookup[c] for c in piece.tolist()]
