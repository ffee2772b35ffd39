"""One validating reader per file format that vault reads and a person or a crash can damage.

A run's per_request.csv and requests.jsonl, a run folder's provenance.json, `vault index slurm plan`'s plan.json,
jobs.json and merged.json: each is parsed here and checked for the shape vault relies on (types, columns, finite
numbers, UTF-8). What does not fit is DamagedFile (exit 5), one line naming the file and the first thing wrong,
never a traceback from deep inside the code that trusted it.
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
from collections.abc import Mapping

from cloudvault.errors import IntegrityError

NUMBER = (int, float)
OPTIONAL = type(None)


class DamagedFile(IntegrityError):
    """{path}: {detail}; it is not as vault wrote it (edited, or cut short): fix or remove it"""


def _text(data: bytes, path: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise DamagedFile(path=path, detail=f"not UTF-8 (byte {exc.start})") from None


def _json(text: str, path: str, where: str = "") -> object:
    try:
        return json.loads(text, parse_constant=lambda name: _no_constant(name, path, where))
    except ValueError as exc:
        raise DamagedFile(path=path, detail=f"{where}not JSON ({exc})") from None


def _no_constant(name: str, path: str, where: str):
    raise DamagedFile(path=path, detail=f"{where}{name} is not a number JSON allows")


def check_shape(doc: object, shape: Mapping[str, object], path: str, where: str = "") -> dict:
    """doc is an object whose keys in shape have the types given (a type or a tuple of them; absent keys are
    allowed unless shape lists them under "required"); numbers must be finite."""
    if not isinstance(doc, dict):
        raise DamagedFile(path=path, detail=f"{where}a JSON {type(doc).__name__}, not an object")
    for key in shape.get("required", ()):
        if key not in doc:
            raise DamagedFile(path=path, detail=f"{where}{key!r} is missing")
    for key, kind in shape.items():
        if key == "required" or key not in doc:
            continue
        value = doc[key]
        if not isinstance(value, kind) or isinstance(value, bool) and bool not in _tuple(kind):
            names = " or ".join(k.__name__.replace("NoneType", "null") for k in _tuple(kind))
            raise DamagedFile(path=path, detail=f"{where}{key!r} is a {type(value).__name__}, not {names}")
        if isinstance(value, float) and not math.isfinite(value):
            raise DamagedFile(path=path, detail=f"{where}{key!r} is {value}, not a finite number")
    return doc


def _tuple(kind) -> tuple:
    return kind if isinstance(kind, tuple) else (kind,)


def json_document(data: bytes, path: str | os.PathLike, shape: Mapping[str, object]) -> dict:
    """A JSON object file, checked against shape."""
    path = os.fspath(path)
    return check_shape(_json(_text(data, path), path), shape, path)


def json_file(path: str | os.PathLike, shape: Mapping[str, object], missing: dict | None = None) -> dict:
    """json_document of the file at path; missing (when given) is returned for a file that is not there."""
    try:
        with open(path, "rb") as fh:
            data = fh.read()
    except FileNotFoundError:
        if missing is None:
            raise
        return missing
    return json_document(data, path, shape)


def json_lines(data: bytes, path: str, shape: Mapping[str, object]) -> list[dict]:
    """A JSON-lines file: one object per non-blank line, each checked against shape."""
    found = []
    for number, line in enumerate(_text(data, path).splitlines(), 1):
        if line.strip():
            where = f"line {number}: "
            found.append(check_shape(_json(line, path, where), shape, path, where))
    return found


def csv_table(data: bytes, path: str, required: tuple[str, ...], numeric: tuple[str, ...]) -> list[dict]:
    """A CSV table with a header: the required columns there, each numeric cell empty or a finite number
    (int or float, as written), every row as long as the header."""
    reader = csv.DictReader(io.StringIO(_text(data, path)))
    try:
        header = reader.fieldnames or []
        lacking = [c for c in required if c not in header]
        if lacking:
            raise DamagedFile(path=path, detail=f"no column {', '.join(lacking)} (its header: {','.join(header)})")
        rows = []
        for row in reader:
            if None in row or any(v is None for v in row.values()):
                raise DamagedFile(path=path, detail=f"row {reader.line_num} has not the header's {len(header)} cells")
            for column in numeric:
                if column in row:
                    row[column] = _number(row[column], path, reader.line_num, column)
            rows.append(row)
    except csv.Error as exc:
        raise DamagedFile(path=path, detail=f"line {reader.line_num}: {exc}") from None
    return rows


def _number(text: str, path: str, line: int, column: str) -> int | float | None:
    if text == "":
        return None
    try:
        return int(text)
    except ValueError:
        pass
    try:
        value = float(text)
    except ValueError:
        raise DamagedFile(path=path, detail=f"line {line}: {column} = {text!r} is not a number") from None
    if not math.isfinite(value):
        raise DamagedFile(path=path, detail=f"line {line}: {column} = {text!r} is not a finite number")
    return value
