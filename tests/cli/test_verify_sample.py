"""`vault verify --sample F --seed N` draws the same sample of a mirror whatever else the catalog holds."""

from __future__ import annotations

import json
import os
import shutil


def _sampled(vault, db, *seed: str) -> set[tuple[str, str | None]]:
    """The (path, archive) of every file and member the sample checked: the mirror's files are all gone, so each
    one checked is a mismatch."""
    r = vault("--catalog", str(db), "verify", "--sample", "20%", *seed, "--json")
    assert r.code == 5, r.err
    return {(m["path"], m["archive"]) for m in json.loads(r.out)["mismatches"]}


def _other_mirror(root):
    """A mirror whose paths sort among the demo's and whose rows come first in the catalog."""
    for i in range(40):
        path = root / f"{i:03d}_other" / "data" / f"run{i}.csv"
        path.parent.mkdir(parents=True)
        path.write_text(f"run,{i}\n")
    return root


def test_a_seeded_sample_of_a_mirror_does_not_depend_on_what_else_the_catalog_holds(demo_mirror, tmp_path, vault):
    mirror = tmp_path / "Marvell_cloud"
    shutil.copytree(demo_mirror, mirror, symlinks=True)
    alone, shared = tmp_path / "alone.db", tmp_path / "shared.db"
    assert vault("--catalog", str(alone), "index", "-q", str(mirror)).code == 0
    assert vault("--catalog", str(shared), "index", "-q", str(_other_mirror(tmp_path / "other"))).code == 0
    assert vault("--catalog", str(shared), "index", "-q", str(mirror)).code == 0
    for path in [p for p in mirror.rglob("*") if p.is_file() or p.is_symlink()]:
        os.unlink(path)
    sample = _sampled(vault, alone, "--seed", "1")
    assert sample == _sampled(vault, shared, "--seed", "1")
    assert sample == _sampled(vault, alone, "--seed", "1")
    assert any(archive for _, archive in sample) and any(archive is None for _, archive in sample)
    assert sample != _sampled(vault, alone, "--seed", "2")
