"""The repro recipe: its TOML schema, loading and validation, and the `{...}` templates its commands use.

A recipe names the entry it reproduces and the recorded result folder; the recorded settings (model, commit,
sampling, env vars, GPU count) are read from the catalog's `entries.settings` at plan time and reached from
templates as `{settings.temperature}`, `{settings.env.LOG_SS}`, never copied into the recipe. The schema is
documented in recipes/README.md ("repro").
"""

from __future__ import annotations

import hashlib
import math
import posixpath
import re
from collections.abc import Mapping
from pathlib import Path

from cloudvault.errors import RecipeInvalid
from cloudvault.recipe import ANY, Required, check, load_recipe

KIND = "repro"
# via: copy (the default: verified copies) or mount (links into a `vault mount`: cloudvault/mount/staging.py)
INPUT = {"entry": str, "path": Required(str), "archive": str, "to": str, "via": str}
SCHEMA = {
    "description": str,
    "entry": Required(str),
    "kind": str,  # harness (per-request compare, the default) | files (byte compare of outputs)
    "record": Required({"folder": Required(str), "files": list, "repetitions": list}),
    # noise floor of the timing judgment: one fraction for every metric, or per metric (ttft, tpot, e2e, throughput)
    "timings": {"noise": (int, float, dict)},
    "environment": {"env_recipe": str, "env_name": str, "docker": str},
    "code": {"entry": str, "path": Required(str), "commit": str},
    "model": {"entry": str, "path": Required(str)},
    "inputs": {ANY: INPUT},
    "run": Required(
        {
            "program": Required(str),
            "args": Required(str),
            "cwd": str,
            "gpus": int,
            "processes_per_gpu": int,
            "cpu_cores_per_gpu": int,
            "env_from_record": bool,
            "env": {ANY: str},
        }
    ),
    "standin": {"program": Required(str), "model": INPUT, "note": str},
    "outputs": {"files": Required(list), "merge": {ANY: str}},  # files kind: record.files
    "compare": {"settings": list, "near_tie_margin": float, "rules": {ANY: (str, dict)}},
    "preflight": {
        "gpu_free_mib": int,
        "instrumentation": list,
        "persistent_output": bool,
        "python_modules": list,
        "install": str,
    },
    # per array task, for --executor slurm (repro/executors/slurm.py)
    "slurm": {"partition": str, "time": str, "mem": str, "cpus_per_task": int, "gres": str},
}
KINDS = ("harness", "files")
TEMPLATE = re.compile(r"\{([A-Za-z_][\w.]*)\}")


class Recipe:
    """A loaded, validated repro recipe."""

    def __init__(self, name: str, path: Path, data: dict, source: bytes | None = None) -> None:
        self.name, self.path, self.data = name, path, data
        self.source = path.read_bytes() if source is None else source  # what the hash is of: a run keeps it
        self.hash = source_hash(self.source)

    @property
    def kind(self) -> str:
        return self.data.get("kind", "harness")

    @property
    def entry(self) -> str:
        return self.data["entry"]

    def section(self, name: str) -> dict:
        return self.data.get(name, {})

    def repetitions(self) -> list[str]:
        """More recorded folders of the record's kind (the same experiment repeated): the timing noise of A."""
        return list(self.section("record").get("repetitions", []))

    def noise_floors(self) -> dict[str, float]:
        """metric -> the smallest change a timing may be called changed by (repro.timings.DEFAULT_FLOOR unset)."""
        from cloudvault.repro.timings import METRICS

        noise = self.section("timings").get("noise")
        if noise is None:
            return {}
        if isinstance(noise, dict):
            return {m: float(v) for m, v in noise.items()}
        return dict.fromkeys(METRICS, float(noise))

    def compare_config(self) -> tuple[dict, list[str] | None, float]:
        """(rules per column, settings that must be equal or None for all shared ones, near-tie margin)."""
        from cloudvault.repro.compare import DEFAULT_NEAR_TIE, DEFAULT_RULES, parse_rule

        section = self.section("compare")
        rules = {c: parse_rule(s) for c, s in section.get("rules", {}).items()} or dict(DEFAULT_RULES)
        return rules, section.get("settings"), float(section.get("near_tie_margin", DEFAULT_NEAR_TIE))


def source_hash(source: bytes) -> str:
    """A recipe's hash, as the catalog records it for each run: the first 16 hex digits of its file's SHA-256."""
    return hashlib.sha256(source).hexdigest()[:16]


def load(name: str) -> Recipe:
    """The recipe named (or a path to a .toml), validated; a bad key, type or rule is RecipeInvalid (exit 2)."""
    path, data = load_recipe(KIND, name, SCHEMA)
    _validate(path, data)
    return Recipe(path.stem, path, data)


def from_source(name: str, path: Path, source: bytes) -> Recipe:
    """The recipe as a run kept it (its file's bytes when it was planned), validated as load does: a detached run
    is judged by the recipe it ran with, whatever the file says now."""
    import tomllib

    try:
        data = tomllib.loads(source.decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise RecipeInvalid(path=path, detail=f"not valid TOML: {exc}") from None
    check(data, SCHEMA, path)
    _validate(path, data)
    return Recipe(name, path, data, source)


def _validate(path: Path, data: dict) -> None:
    """What the schema cannot say: the kind, the noise floors, the repetitions, each compare rule."""
    from cloudvault.repro.compare import parse_rule

    if data.get("kind", "harness") not in KINDS:
        raise RecipeInvalid(path=path, detail=f"'kind' must be one of {', '.join(KINDS)}, not {data['kind']!r}")
    _check_noise(path, data.get("timings", {}).get("noise"))
    _check_repetitions(path, data["record"])
    for column, spec in data.get("compare", {}).get("rules", {}).items():
        try:
            parse_rule(spec)
        except ValueError as exc:
            raise RecipeInvalid(path=path, detail=f"'compare.rules.{column}': {exc}") from None


def _check_noise(path: Path, noise: object) -> None:
    """timings.noise: a fraction in [0, 10), or a table of them per metric; a bool is not a number."""
    from cloudvault.repro.timings import METRICS

    table = noise if isinstance(noise, dict) else {"noise": noise} if noise is not None else {}
    for metric, floor in table.items():
        number = isinstance(floor, int | float) and not isinstance(floor, bool) and math.isfinite(floor)
        if (metric != "noise" and metric not in METRICS) or not number or not 0 <= floor < 10:
            raise RecipeInvalid(path=path, detail=f"'timings.noise': {metric} = {floor!r}; a fraction (0.05 is 5%) "
                                f"per metric of {', '.join(METRICS)}")  # fmt: skip


def _check_repetitions(path: Path, record: Mapping) -> None:
    """record.repetitions: folders of the record's entry, each another run than the record and than each other
    (a run counted twice would measure no noise at all)."""
    seen = {posixpath.normpath(record["folder"].strip("/")): "the record folder"}
    for folder in record.get("repetitions", []):
        if not isinstance(folder, str) or not folder.strip("/ "):
            raise RecipeInvalid(path=path, detail=f"'record.repetitions': {folder!r} is not a folder of the entry")
        name = posixpath.normpath(folder.strip("/"))
        if name in seen:
            raise RecipeInvalid(path=path, detail=f"'record.repetitions': {folder!r} is {seen[name]} again; each "
                                "repetition is another independent run of the record's kind")  # fmt: skip
        seen[name] = f"repetition {folder!r}"


def expand(template: str, context: Mapping, *, where: str, recipe: Path, quote=None) -> str:
    """template with every {dotted.name} replaced from context; an unknown name is RecipeInvalid naming it.
    quote (shlex.quote for a command line) is applied to each value, so a path with a space stays one word."""

    def value(match: re.Match) -> str:
        node: object = context
        for part in match[1].split("."):
            if not isinstance(node, Mapping) or part not in node:
                raise RecipeInvalid(path=recipe, detail=f"{where}: unknown template name {{{match[1]}}}")
            node = node[part]
        text = node if isinstance(node, str) else str(node).lower() if isinstance(node, bool) else str(node)
        return quote(text) if quote and text else text

    return TEMPLATE.sub(value, template)
