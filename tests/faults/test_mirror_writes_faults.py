"""The mirror is read-only to vault: no writer (repro's cwd, --out and input `to`, compare --out, extract -o, the
catalog itself) puts a byte into any mirror the catalog knows, and repro stages no member that climbs out."""

from __future__ import annotations

import io
import shutil
import tarfile

import zstandard

from faults.hostile import changed, hostile_recipe, mirror_state

RESULTS = "016_ysshin_rtxpro6000_results/data/results"


def _refused_untouched(r, root, before, tally, code=2) -> None:
    found = changed(before, mirror_state(root))
    tally("write_outside", len(found))
    assert found == [], found
    assert r.code == code and "inside the mirror" in r.err, r.err
    assert r.err.count("\n") == 1 and "Traceback" not in r.err


def test_a_recipe_cwd_inside_the_mirror_cannot_overwrite_the_recorded_results(own_mirror, vault, tmp_path,
                                                                              monkeypatch, tally):  # fmt: skip
    root, db = own_mirror
    name = hostile_recipe(tmp_path, monkeypatch, "cwd_in_mirror", "016_plots",
                          lambda t: t.replace('cwd = "{inputs.results}"', f'cwd = "{root / RESULTS}"'))  # fmt: skip
    before = mirror_state(root)
    tally("hostile_input")
    r = vault("--catalog", str(db), "repro", name, "--out", str(tmp_path / "runs"))
    _refused_untouched(r, root, before, tally)
    assert "run.cwd" in r.err
    assert not (tmp_path / "runs").exists() or not list((tmp_path / "runs").iterdir())


def test_a_recipe_cwd_that_climbs_out_of_the_run_folder_is_refused(own_mirror, vault, tmp_path, monkeypatch, tally):
    root, db = own_mirror
    name = hostile_recipe(tmp_path, monkeypatch, "cwd_up", "016_plots",
                          lambda t: t.replace('cwd = "{inputs.results}"', 'cwd = "{run}/../../elsewhere"'))  # fmt: skip
    tally("hostile_input")
    r = vault("--catalog", str(db), "repro", name, "--out", str(tmp_path / "a/runs"))
    tally("write_outside", int((tmp_path / "elsewhere").exists()))
    assert r.code == 2 and "run.cwd" in r.err and "outside the run folder" in r.err, r.err
    assert not (tmp_path / "elsewhere").exists()


def test_an_input_to_that_names_the_mirror_or_climbs_out_is_refused(own_mirror, vault, tmp_path, monkeypatch, tally):
    root, db = own_mirror
    before = mirror_state(root)
    for i, to in enumerate((str(root / RESULTS / "restaged"), "../../escaped")):
        name = hostile_recipe(tmp_path, monkeypatch, f"to_{i}", "016_plots",
                              lambda t, to=to: t.replace('to = "work"', f'to = "{to}"'))  # fmt: skip
        tally("hostile_input")
        r = vault("--catalog", str(db), "repro", name, "--out", str(tmp_path / "r/runs"))
        found = changed(before, mirror_state(root)) + [str(p) for p in tmp_path.glob("escaped")]
        tally("write_outside", len(found))
        assert found == [] and r.code == 2 and "inputs.results" in r.err, (to, r.err)


def test_repro_out_inside_any_known_mirror_is_refused_not_only_the_entrys_own(own_mirror, vault, tmp_path, tally):
    root, db = own_mirror
    other = tmp_path / "other/Marvell_copy"
    shutil.copytree(root / "001_rtx_pro6000_sweep", other / "001_rtx_pro6000_sweep")
    assert vault("--catalog", str(db), "index", "--quiet", str(other)).code == 0
    before = mirror_state(other)
    tally("hostile_input")
    out = other / "001_rtx_pro6000_sweep/runs"
    r = vault("--catalog", str(db), "repro", "014_ss20_temp0", "--standin", "--out", str(out))
    _refused_untouched(r, other, before, tally)


def test_compare_out_inside_a_mirror_is_refused(own_mirror, vault, tally):
    root, db = own_mirror
    before = mirror_state(root)
    tally("hostile_input")
    r = vault("--catalog", str(db), "compare", "014", "014", "--out", str(root / "014_ss20_temp0_chunk1024/cmp"))
    _refused_untouched(r, root, before, tally)


def test_extract_into_a_mirror_is_refused_also_by_the_default_dot(own_mirror, vault, monkeypatch, tally):
    root, db = own_mirror
    before = mirror_state(root)
    tally("hostile_input")
    r = vault("--catalog", str(db), "extract", "018", "verify_summary.txt", "-o", str(root / "018_x"))
    _refused_untouched(r, root, before, tally)
    monkeypatch.chdir(root / "018_aicluster_breakdown_debugger/logs")
    tally("hostile_input")
    r = vault("--catalog", str(db), "extract", "018", "verify_summary.txt", "--force")
    _refused_untouched(r, root, before, tally)


def test_seekable_copies_are_never_written_into_a_mirror(own_mirror, vault, tally):
    root, db = own_mirror
    before = mirror_state(root)
    tally("hostile_input")
    r = vault("--catalog", str(db), "optimize", "--to", str(root / "_docker/cache"))
    _refused_untouched(r, root, before, tally)


def test_a_catalog_inside_the_mirror_is_refused_before_it_is_created(own_mirror, demo_mirror, vault, tmp_path, tally):
    root, db = own_mirror
    before = mirror_state(root)
    tally("hostile_input")
    r = vault("--catalog", str(root / "vault.db"), "index", "--quiet", str(root))
    _refused_untouched(r, root, before, tally)
    tally("hostile_input")  # a catalog that already knows the mirror, placed inside it
    inside = root / "014_ss20_temp0_chunk1024/catalog.db"
    shutil.copy(db, inside)
    before = mirror_state(root)
    r = vault("--catalog", str(inside), "index", "--quiet")
    _refused_untouched(r, root, before, tally)


def _hostile_inputs_archive(path) -> None:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.GNU_FORMAT) as tar:
        for name, data in (("docs/ok.jsonl", b'{"doc_id": "a"}\n'), ("docs/../../../../escaped.txt", b"out\n")):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    path.write_bytes(zstandard.ZstdCompressor().compress(buf.getvalue()))


def test_repro_never_stages_an_unsafe_member_outside_the_run_folder(own_mirror, vault, tmp_path, monkeypatch, tally):
    root, db = own_mirror
    _hostile_inputs_archive(root / "016_ysshin_rtxpro6000_results/data/evil.tar.zst")
    r = vault("--catalog", str(db), "index", "--quiet", str(root))
    assert r.code in (0, 5), r.err
    recipe = hostile_recipe(tmp_path, monkeypatch, "unsafe_stage", "016_plots", lambda t: t.replace(
        'path = "data/results"\nto = "work"', 'path = "docs"\narchive = "data/evil.tar.zst"\nto = "work"'))  # fmt: skip
    tally("hostile_input")
    out = tmp_path / "a/b/c/runs"
    r = vault("--catalog", str(db), "repro", recipe, "--out", str(out))
    escaped = [str(p) for p in tmp_path.rglob("escaped.txt")]
    tally("write_outside", len(escaped))
    assert escaped == []
    assert r.code == 5 and "refusing 'docs/../../../../escaped.txt'" in r.err, r.err


def _mirror_in_the_default_catalog(tmp_path, vault):
    """Another mirror, indexed into the user's default catalog (not the one a later command is pointed at)."""
    other = tmp_path / "elsewhere/Marvell_cloud"
    (other / "018_x").mkdir(parents=True)
    (other / "018_x/verify_summary.txt").write_text("the mirror's own bytes\n")
    r = vault("index", "--quiet", str(other))
    assert r.code == 0, r.err
    return other


def test_extract_force_into_a_mirror_of_another_catalog_of_this_user_is_refused(demo_catalog, vault, tmp_path,
                                                                                monkeypatch, tally):  # fmt: skip
    """Class: a write into a mirror the active catalog does not know, but another catalog of this user indexed
    (VAULT_CATALOG pointed at the demo, as the demo's last line suggests)."""
    other = _mirror_in_the_default_catalog(tmp_path, vault)
    monkeypatch.setenv("VAULT_CATALOG", str(demo_catalog))
    before = mirror_state(other)
    tally("hostile_input")
    r = vault("extract", "018", "verify_summary.txt", "--force", "-o", str(other / "018_x"))
    _refused_untouched(r, other, before, tally)
    assert (other / "018_x/verify_summary.txt").read_text() == "the mirror's own bytes\n"
    monkeypatch.chdir(other / "018_x")
    tally("hostile_input")
    r = vault("extract", "018", "verify_summary.txt", "--force")
    _refused_untouched(r, other, before, tally)


def test_repro_out_dot_inside_a_mirror_of_another_catalog_is_refused(demo_catalog, vault, tmp_path, monkeypatch,
                                                                     tally):  # fmt: skip
    other = _mirror_in_the_default_catalog(tmp_path, vault)
    monkeypatch.setenv("VAULT_CATALOG", str(demo_catalog))
    monkeypatch.chdir(other)
    before = mirror_state(other)
    tally("hostile_input")
    r = vault("repro", "016_plots", "--out", ".")
    _refused_untouched(r, other, before, tally)


def test_the_guard_still_knows_a_mirror_whose_catalog_was_deleted(demo_catalog, vault, tmp_path, monkeypatch, tally):
    """The registry outlives the catalog: every root any catalog of this user indexed stays guarded until it is
    forgotten on purpose (`vault mirrors rm`)."""
    other = _mirror_in_the_default_catalog(tmp_path, vault)
    for db in (tmp_path / "home/.local/share/cloudvault").glob("catalog.db*"):
        db.unlink()
    before = mirror_state(other)
    tally("hostile_input")
    r = vault("--catalog", str(demo_catalog), "compare", "014", "014", "--out", str(other / "cmp"))
    _refused_untouched(r, other, before, tally)
