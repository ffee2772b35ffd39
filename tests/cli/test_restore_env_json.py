"""`vault restore env ... --json`: each mode's document is the typed result's to_json(), documented field by field
in docs/commands/restore-env.md (a real run is the snapshot), and the catalog stores the same document."""

from __future__ import annotations

import dataclasses
import json
import sqlite3

from tests.cli.json_shapes import check


def test_list_dry_run_restore_and_move_json_are_the_documented_shapes(demo_catalog, vault, tmp_path):
    db = str(demo_catalog)
    listed = vault("--catalog", db, "restore", "env", "nebius", "--list", "--json")
    assert listed.code == 0, listed.err
    check(json.loads(listed.out), "restore-env.md", "--list")
    target = tmp_path / "envs/vaultdemo"
    planned = vault("--catalog", db, "restore", "env", "nebius", "vaultdemo", "--prefix", str(target), "--dry-run",
                    "--json")  # fmt: skip
    assert planned.code == 0, planned.err
    check(json.loads(planned.out), "restore-env.md", "--dry-run")
    restored = vault("--catalog", db, "restore", "env", "nebius", "vaultdemo", "--prefix", str(target), "--json")
    assert restored.code == 0, restored.err
    doc = json.loads(restored.out)
    check(doc, "restore-env.md", "restore")
    stored = sqlite3.connect(db).execute("SELECT detail FROM restores WHERE status = 'ok'").fetchall()
    assert [json.loads(d) for (d,) in stored] == [
        {k: v for k, v in doc["restored"][0].items() if k not in ("name", "target")}
    ]
    again = vault("--catalog", db, "restore", "env", "nebius", "vaultdemo", "--prefix", str(target), "--json")
    check(json.loads(again.out), "restore-env.md", "restore")
    assert json.loads(again.out)["restored"][0]["status"] == "already restored"
    moved = tmp_path / "moved/vaultdemo"
    args = ("--catalog", db, "restore", "env", "nebius", "vaultdemo", "--move", str(target), "--prefix", str(moved))
    planned = vault(*args, "--dry-run", "--json")
    assert planned.code == 0, planned.err
    check(json.loads(planned.out), "restore-env.md", "--move --dry-run")
    done = vault(*args, "--json")
    assert done.code == 0, done.err
    check(json.loads(done.out), "restore-env.md", "--move")


def test_the_operations_hand_the_cli_frozen_typed_results():
    from cloudvault.restore.env import results

    for cls in (results.EnvPlan, results.EnvRestored, results.EnvMoved, results.MovePlan, results.EnvListed,
                results.EnvList, results.EnvPlans, results.EnvsRestored):  # fmt: skip
        assert dataclasses.is_dataclass(cls) and cls.__dataclass_params__.frozen, cls
