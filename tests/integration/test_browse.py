"""`vault browse` as the lab uses it: a real server on the demo catalog, read over HTTP and in headless Chromium."""

from __future__ import annotations

import hashlib
import json
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import blake3
import pytest
from conftest import REPO, require

from cloudvault.catalog import records
from cloudvault.catalog.db import open_catalog
from cloudvault.catalog.query import resolve_entry, search
from cloudvault.demo.build import FAKE_TOKEN
from cloudvault.demo.serving import SERVING

pytestmark = pytest.mark.browser
RUN_ID = "014_ss20_temp0-20261203T080000Z"
DIVERGED_DOC = "670bf1c4"
CHROMIUM_FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
    "--no-first-run", "--disable-sync", "--disable-dev-shm-usage",  # a container's small /dev/shm crashes tabs
]  # fmt: skip


def require_module(name: str) -> None:
    """Like conftest.require for a Python package: skip here, fail under CI=true (the test extra installs it)."""
    try:
        __import__(name)
    except ImportError:
        if os.environ.get("CI") == "true":
            pytest.fail(f"{name} is required in CI but is not installed (pip install -e '.[test]')")
        pytest.skip(f"{name} not installed")


def record_014_run_and_a_restore(db: Path) -> None:
    """What `vault repro 014` and `vault restore env` leave in the catalog: the 23-of-24 rerun of dashboard 3.5."""
    conn = open_catalog(db)
    mirror_id, entry, _ = resolve_entry(conn, "014")
    folder = "/runs/014_ss20_temp0/20261203T080000Z"
    records.start_run(conn, run_id=RUN_ID, recipe="014_ss20_temp0", recipe_hash="3f2a9c", mirror_id=mirror_id,
                      entry_id=entry, executor="slurm", folder=folder, job_id="4242")  # fmt: skip
    requests = [(f"doc{i:02d}", "identical", None, {}) for i in range(23)]
    requests.append((DIVERGED_DOC, "diverged", 1498, {"prompt_tokens": 167246}))
    records.finish_run(conn, RUN_ID, status="finished", verdict="DIVERGED", requests=requests,
                       summary={"identical": 23, "diverged": 1, "tokens_per_s": 38.51})  # fmt: skip
    mirror_id, entry, _ = resolve_entry(conn, "015")
    records.record_restore(conn, kind="env", mirror_id=mirror_id, entry_id=entry, name="vaultdemo",
                           source="data/miniforge3_tar/vaultdemo.tar.zst", source_hash="1ecb79", target="/tmp/envs/x",
                           status="ok", detail={"files": 18}, started_at=records.now())  # fmt: skip
    conn.close()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_browse(db: Path, *args: str) -> tuple[subprocess.Popen, str]:
    """`vault browse --no-open` as a user starts it; returns the process and the URL it printed."""
    with open(db.with_name("browse.err"), "w") as log:  # a file, not a pipe nobody reads: a full one would stall it
        proc = subprocess.Popen(
            [sys.executable, "-m", "cloudvault", "--catalog", str(db), "browse", "--no-open", *args],
            stdout=subprocess.PIPE, stderr=log, text=True,
        )  # fmt: skip
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        ready, _, _ = select.select([proc.stdout], [], [], 0.5)
        if ready:
            line = proc.stdout.readline()
            if "read-only at http://" in line:
                return proc, line.split(" at ", 1)[1].split()[0]
        if proc.poll() is not None:
            raise AssertionError(f"vault browse exited {proc.returncode}: {db.with_name('browse.err').read_text()}")
    proc.kill()
    raise AssertionError("vault browse printed no URL in 30 s")


def stop(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


@pytest.fixture(scope="module")
def served(tmp_path_factory, demo_mirror):
    """A demo catalog with a repro run and a restore recorded, served by a real `vault browse` subprocess."""
    require_module("datasette")
    from cloudvault.cli.main import run_command

    db = tmp_path_factory.mktemp("browse") / "catalog.db"
    assert run_command(["--catalog", str(db), "index", "-q", "--mirror", "marvell_cloud", str(demo_mirror)]) == 0
    serving = demo_mirror.parent / SERVING  # the second mirror of the demo: its env snapshot holds the token too
    assert run_command(["--catalog", str(db), "index", "-q", str(serving)]) == 0
    record_014_run_and_a_restore(db)
    proc, url = start_browse(db, "--port", str(free_port()))
    yield db, url
    stop(proc)


def get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=30) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def rows(url: str, page: str) -> list[dict]:
    status, body = get(f"{url}/{page}{'&' if '?' in page else '?'}_shape=array")
    assert status == 200, body
    return json.loads(body)


# -- what the pages say ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("terms", [["granite"], ["b16r64"], ["run10", "accept"], ["n8"], [RUN_ID[:12]], ["vaultdemo"]])
def test_search_page_finds_what_vault_search_finds(served, terms):
    db, url = served
    page = rows(url, f"search.json?q={'+'.join(terms)}")
    conn = open_catalog(db, readonly=True)
    expected = search(conn, terms, limit=100)
    conn.close()
    want = {(h.kind, h.entry, h.path) for hits in expected.hits.values() for h in hits}
    assert want and {(r["kind"], r["entry"], r["path"]) for r in page} == want
    for r in page:
        if r["entry"] in expected.cautions:
            assert r["cautions"] == "; ".join(expected.cautions[r["entry"]])


def test_search_hits_carry_their_cautions_and_commands(served):
    _, url = served
    hits = {(r["kind"], r["entry"]): r for r in rows(url, "search.json?q=granite")}
    entry = hits["entry", "012_granite_medium20_sparsespec_b1"]
    assert entry["cautions"] == "LOG_SS=2 inflates TPOT and E2E: do not use"
    assert entry["command"] == "vault show 012_granite_medium20_sparsespec_b1"
    assert entry["open"] == "entry?entry=012_granite_medium20_sparsespec_b1"
    run = rows(url, f"search.json?q={RUN_ID}")
    assert [(r["kind"], r["open"]) for r in run] == [("run", f"run?run={RUN_ID}")]


def test_commands_on_the_page_extract_what_they_name(served, vault, tmp_path, monkeypatch):
    db, url = served
    members = rows(url, "members.json?archive=accept_g07&path=accept_meta.json")
    assert len(members) == 1
    member = members[0]
    assert member["command"] == (
        "vault extract 018_aicluster_breakdown_debugger dumps/accept_meta.json --archive accept_g07.tar.zst"
    )
    monkeypatch.chdir(tmp_path)
    argv = member["command"].split()[1:]
    result = vault("--catalog", str(db), *argv)
    assert result.code == 0, result.err
    assert blake3.blake3((tmp_path / "accept_meta.json").read_bytes()).hexdigest() == member["blake3"]
    assert (tmp_path / "accept_meta.json").stat().st_size == member["size"]
    plain = [r for r in rows(url, "search.json?q=gra_ss_b16r64+summary.csv") if r["kind"] == "file"]
    assert len(plain) == 1
    assert plain[0]["command"].startswith("vault extract 004_granite_30b_batch_sweep data/gra_ss_b16r64_")
    assert vault("--catalog", str(db), *plain[0]["command"].split()[1:]).code == 0
    assert blake3.blake3((tmp_path / "summary.csv").read_bytes()).hexdigest() == plain[0]["blake3"]


def test_entry_page_of_014_has_cautions_settings_and_its_run(served):
    _, url = served
    fields = {r["field"]: r for r in rows(url, "entry.json?entry=014")}
    assert fields["entry"]["value"] == "014_ss20_temp0_chunk1024"
    assert fields["cautions"]["value"] == "none recorded"
    assert fields["setting commit"]["value"] == "8246fb6"
    assert json.loads(fields["setting env"]["value"])["LOG_SS"] == "1"
    assert fields[f"run {RUN_ID}"]["value"] == "finished DIVERGED"
    assert fields[f"run {RUN_ID}"]["open"] == f"run?run={RUN_ID}"
    assert fields["command"]["value"] == "vault show 014_ss20_temp0_chunk1024"
    caution = {r["field"]: r["value"] for r in rows(url, "entry.json?entry=019")}["cautions"]
    assert caution == "Logs contain HF_TOKEN in plaintext: never share externally; 1 secret flag(s)"
    missing = rows(url, "entry.json?entry=999")
    assert missing[0]["field"] == "not found" and "no entry matches '999'" in missing[0]["value"]
    assert "names" in rows(url, "entry.json?entry=01")[0]["value"]  # ambiguous: the candidates, as vault show says


def test_run_pages_show_verdict_and_per_request_comparison(served):
    _, url = served
    run = {r["field"]: r["value"] for r in rows(url, f"run.json?run={RUN_ID}")}
    assert run["verdict"] == "DIVERGED" and run["requests diverged"] == 1 and run["requests identical"] == 23
    assert run["executor"] == "slurm job 4242"
    listed = rows(url, "runs.json?entry=014")
    assert [(r["run_id"], r["verdict"], r["requests"]) for r in listed] == [(RUN_ID, "DIVERGED",
                                                                             "1 diverged, 23 identical")]  # fmt: skip
    requests = rows(url, f"run_requests.json?run={RUN_ID}")
    assert len(requests) == 24
    assert (requests[0]["request"], requests[0]["verdict"], requests[0]["first_divergence"]) == (
        DIVERGED_DOC,
        "diverged",
        1498,
    )


def test_a_run_recorded_while_the_page_is_open_shows_up_on_reload(served):
    db, url = served
    assert rows(url, "runs.json?entry=013") == []
    conn = open_catalog(db)
    mirror_id, entry, _ = resolve_entry(conn, "013")
    records.start_run(conn, run_id="013_vanilla-live", recipe="013_vanilla", recipe_hash="77", mirror_id=mirror_id,
                      entry_id=entry, executor="local", folder="/runs/013")  # fmt: skip
    conn.close()
    assert [(r["run_id"], r["status"], r["verdict"]) for r in rows(url, "runs.json?entry=013")] == [
        ("013_vanilla-live", "running", None)
    ]


def test_flags_restores_and_archives_pages(served):
    db, url = served
    flags = rows(url, "flags.json?entry=019")
    assert [(f["kind"], f["member"]) for f in flags] == [("secret", "logs/saturate_env.log")]
    assert "value not stored" in flags[0]["detail"]
    restores = rows(url, "restores.json?entry=015")
    assert [(r["name"], r["status"]) for r in restores] == [("vaultdemo", "ok")]
    archives = rows(url, "archives.json")
    conn = open_catalog(db, readonly=True)
    want = conn.execute("SELECT f.path, f.blake3 FROM archives a JOIN files f ON f.id = a.file_id").fetchall()
    conn.close()
    assert sorted((a["archive"], a["blake3"]) for a in archives) == sorted(want)


def test_pages_are_titled_by_their_journey_not_their_sql(served):
    """Datasette titles a query page with its SQL (kilobytes on the search page): each page says what it is."""
    _, url = served
    want = {
        "search?q=granite": "Search everything: granite · cloudvault catalog",
        "entry?entry=014": "One entry: 014 · cloudvault catalog",
        "flags": "Flags and damage · cloudvault catalog",
        f"run?run={RUN_ID}": f"One run: {RUN_ID} · cloudvault catalog",
    }
    for page, title in want.items():
        status, body = get(f"{url}/{page}")
        assert status == 200, body
        assert body.split("<title>", 1)[1].split("</title>", 1)[0] == title


# -- safety ------------------------------------------------------------------------------------------------------
def test_no_served_page_holds_the_demo_secret(served):
    db, url = served
    base = url.rsplit("/", 1)[0]
    conn = open_catalog(db, readonly=True)
    tables = [t for (t,) in conn.execute("SELECT name FROM sqlite_master WHERE type IN ('table', 'view')")]
    conn.close()
    pages = [f"{base}/", url, f"{url}.json", f"{base}/-/metadata.json"]
    pages += [f"{url}/{t}.json?_shape=array&_size=max" for t in tables] + [f"{url}/{t}" for t in tables]
    pages += [f"{url}/{q}" for q in ("search?q=HF_TOKEN", "search?q=hf_", "search?q=saturate_env", "search?q=hf",
                                     "flags?entry=", "entry?entry=019", "members?archive=saturate&path=",
                                     "search?q=container_env", "entry?entry=c4-mtp-ab")]  # fmt: skip
    for page in pages:
        status, body = get(page)
        assert status == 200, (page, body[:300])
        assert FAKE_TOKEN not in body and FAKE_TOKEN[3:] not in body, page
    assert "saturate_env.log" in get(f"{url}/search?q=saturate_env")[1]  # the file is found, its secret is not shown
    assert "container_env.txt" in get(f"{url}/flags?entry=")[1]  # so is the serving mirror's, flagged


def test_writes_through_the_server_fail_and_the_catalog_is_unchanged(served):
    db, url = served
    before = hashlib.sha256(db.read_bytes()).hexdigest()
    insert = json.dumps({"row": {"mirror_id": 1, "entry_id": "999_pwned"}}).encode()
    for target in (f"{url}/entries/-/insert", f"{url}/-/create", f"{url}/search"):
        request = urllib.request.Request(target, data=insert, headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=30) as resp:
                status = resp.status
        except urllib.error.HTTPError as exc:
            status = exc.code
        assert status == 405, target
    sql = urllib.request.quote("INSERT INTO entries (mirror_id, entry_id) VALUES (1, 'x')")
    status, body = get(f"{url}.json?sql={sql}")
    assert status == 400 and "Statement must be a SELECT" in body
    conn = open_catalog(db, readonly=True)
    assert conn.execute("SELECT count(*) FROM entries WHERE entry_id IN ('x', '999_pwned')").fetchone()[0] == 0
    conn.close()
    assert hashlib.sha256(db.read_bytes()).hexdigest() == before


def test_datasette_own_write_connection_cannot_write(served, monkeypatch):
    """Below the HTTP layer: even a plugin or canned write query on Datasette's write connection is refused."""
    import asyncio
    import sqlite3

    from cloudvault.browse import server

    db, _ = served
    database = server.build_app(db).get_database("catalog")
    assert database.is_mutable  # mode=ro: rows that vault repro records while the page is open show up
    with pytest.raises(sqlite3.OperationalError, match="readonly"):
        asyncio.run(database.execute_write("DELETE FROM runs"))
    monkeypatch.setattr(server.os, "access", lambda path, mode: False)  # a folder this user cannot write
    assert not server.build_app(db).get_database("catalog").is_mutable  # immutable: no -shm needed there


def test_a_catalog_path_with_uri_characters_is_served_as_itself(served, tmp_path):
    import asyncio

    from cloudvault.browse import server

    db, _ = served
    odd = tmp_path / "lab share #2" / "cat%20alog?.db"
    odd.parent.mkdir()
    shutil.copy(db, odd)
    ds = server.build_app(odd)
    response = asyncio.run(ds.client.get("/catalog/entry.json?entry=014&_shape=array"))
    assert response.status_code == 200, response.text
    assert {r["field"]: r["value"] for r in response.json()}["setting commit"] == "8246fb6"


def test_an_entry_id_two_mirrors_share_is_named_with_its_mirror(served, tmp_path, vault):
    """Commands and links say mirror:entry only where the bare ID would be ambiguous, and they resolve."""
    import asyncio
    import sqlite3

    from cloudvault.browse import server

    db, _ = served
    twin = tmp_path / "catalog.db"
    shutil.copy(db, twin)
    with sqlite3.connect(twin) as conn:
        conn.execute("INSERT INTO mirrors (id, name, root) VALUES (9, 'rerun_copy', '/nowhere')")
        conn.execute("INSERT INTO entries (mirror_id, entry_id, what) VALUES (9, '014_ss20_temp0_chunk1024', 'twin')")
    ds = server.build_app(twin)

    def page(path: str) -> list[dict]:
        return asyncio.run(ds.client.get(f"/catalog/{path}&_shape=array")).json()

    hits = {r["text"]: r for r in page("search.json?q=chunk1024") if r["kind"] == "entry"}
    assert hits["twin"]["command"] == "vault show rerun_copy:014_ss20_temp0_chunk1024"
    ours = hits["SparseSpec batch 1, temp 0, chunk 1024, LOG_SS=1, 20 docs"]
    assert ours["command"] == "vault show marvell_cloud:014_ss20_temp0_chunk1024"
    assert ours["open"] == "entry?entry=marvell_cloud%3A014_ss20_temp0_chunk1024"
    card = {r["field"]: r["value"] for r in page("entry.json?entry=marvell_cloud:014_ss20_temp0_chunk1024")}
    assert card["setting commit"] == "8246fb6" and card[f"run {RUN_ID}"] == "finished DIVERGED"
    assert "names 2 entries" in page("entry.json?entry=014")[0]["value"]
    assert [r["run_id"] for r in page("runs.json?entry=rerun_copy:014")] == []
    assert vault("--catalog", str(twin), *ours["command"].split()[1:]).code == 0
    assert vault("--catalog", str(twin), "show", "014").code == 4  # why the page qualifies it


def listening_addresses(port: int) -> set[str]:
    """Local addresses (hex, as the kernel lists them) with a socket listening on port."""
    rows = [line.split() for line in Path("/proc/net/tcp").read_text().splitlines()[1:]]
    return {r[1].split(":")[0] for r in rows if r[3] == "0A" and int(r[1].split(":")[1], 16) == port}


def test_listens_on_loopback_only_by_default(served):
    _, url = served
    port = int(url.rsplit(":", 1)[1].split("/")[0])
    assert url.startswith("http://127.0.0.1:")
    assert listening_addresses(port) == {"0100007F"}  # 127.0.0.1, not 0.0.0.0


def test_another_host_is_said_out_loud(served):
    db, _ = served
    proc, url = start_browse(db, "--port", "0", "--host", "0.0.0.0")
    try:
        port = int(url.rsplit(":", 1)[1].split("/")[0])
        assert listening_addresses(port) == {"00000000"}
    finally:
        stop(proc)
    warning = db.with_name("browse.err").read_text()
    assert warning == "vault: listening on 0.0.0.0: anyone who can reach this machine can read the catalog\n"


def test_ctrl_c_stops_the_server_cleanly_exit_0(served):
    db, _ = served
    proc, url = start_browse(db, "--port", "0")
    assert get(f"{url}/entry.json?entry=014")[0] == 200
    proc.send_signal(signal.SIGINT)
    out, _ = proc.communicate(timeout=30)
    assert proc.returncode == 0 and out.strip() == "stopped"
    assert db.with_name("browse.err").read_text() == ""


def test_port_in_use_is_one_line_exit_6(served):
    db, _ = served
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = subprocess.run([sys.executable, "-m", "cloudvault", "--catalog", str(db), "browse", "--no-open",
                                 "--port", str(port)], capture_output=True, text=True, timeout=60)  # fmt: skip
    assert result.returncode == 6
    assert result.stderr.startswith(f"vault: error: cannot listen on 127.0.0.1:{port}")
    assert result.stderr.count("\n") == 1


def test_missing_catalog_exits_3_before_serving(vault, tmp_path):
    require_module("datasette")
    result = vault("--catalog", str(tmp_path / "none.db"), "browse", "--no-open", "--port", "0")
    assert result.code == 3 and "no catalog at" in result.err


def test_without_the_browse_extra_it_says_how_to_install_it(vault, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "datasette", None)  # import datasette now raises ImportError
    result = vault("--catalog", str(tmp_path / "catalog.db"), "browse", "--no-open")
    assert result.code == 7
    assert "pip install 'cloudvault[browse]'" in result.err and result.err.count("\n") == 1


def test_bad_port_is_a_usage_error(vault):
    assert vault("browse", "--port", "70000").code == 2


# -- in a real browser -------------------------------------------------------------------------------------------
@pytest.mark.integration
def test_lab_member_searches_opens_014_and_its_run_in_chromium(served, tmp_path):
    require_module("playwright")
    chromium = require("chromium")
    from playwright.sync_api import sync_playwright

    db, url = served
    before = hashlib.sha256(db.read_bytes()).hexdigest()
    with sync_playwright() as pw:
        browser = pw.chromium.launch_persistent_context(
            str(tmp_path / "profile"), executable_path=chromium, headless=True, args=CHROMIUM_FLAGS,
            viewport={"width": 1280, "height": 800},
        )  # fmt: skip
        try:
            page = browser.new_page()
            search_granite(page, url, tmp_path)
            open_014_and_its_run(page, url, tmp_path)
            write_attempts_from_the_page(page, url)
        finally:
            browser.close()
    assert hashlib.sha256(db.read_bytes()).hexdigest() == before
    if os.environ.get("VAULT_UPDATE_SCREENSHOT") == "1":  # refresh the README's picture by hand, not on every run
        shutil.copy(tmp_path / "search.png", REPO / "docs" / "browse.png")


def search_granite(page, url: str, shots: Path) -> None:
    page.goto(url)  # the page `vault browse` prints and opens: a search box first
    page.fill("input[name=q]", "granite")
    page.press("input[name=q]", "Enter")
    page.wait_for_url("**/search?q=granite*")
    table = page.inner_text("table.rows-and-columns")
    assert "004_granite_30b_batch_sweep" in table and "012_granite_medium20_sparsespec_b1" in table
    assert "LOG_SS=2 inflates TPOT and E2E: do not use" in table
    commands = page.locator("code.vault-command").all_inner_texts()
    assert "vault show 004_granite_30b_batch_sweep" in commands
    assert any(c.startswith("vault extract 004_granite_30b_batch_sweep data/") for c in commands)
    page.screenshot(path=str(shots / "search.png"))


def open_014_and_its_run(page, url: str, shots: Path) -> None:
    page.goto(f"{url}/entry?entry=014")
    text = page.inner_text("table.rows-and-columns")
    for seen in ("cautions", "none recorded", "setting commit", "8246fb6", "SSPEC_MAX_DRAFT_KV", "finished DIVERGED"):
        assert seen in text, seen
    page.screenshot(path=str(shots / "entry-014.png"), full_page=True)
    page.click(f"a[href$='run?run={RUN_ID}']")
    page.wait_for_url(f"**/run?run={RUN_ID}")
    cells = page.locator("table.rows-and-columns tr").all_inner_texts()
    assert any([cell.strip() for cell in row.split("\t")[:2]] == ["verdict", "DIVERGED"] for row in cells), cells
    page.click("a[href*='run_requests?run=']")
    first = page.locator("table.rows-and-columns tbody tr").first.inner_text().split("\t")
    assert first[:3] == [DIVERGED_DOC, "diverged", "1498"]
    page.screenshot(path=str(shots / "run.png"))


def write_attempts_from_the_page(page, url: str) -> None:
    status = page.evaluate(
        """async (target) => (await fetch(target, {method: 'POST', headers: {'Content-Type': 'application/json'},
                               body: JSON.stringify({row: {mirror_id: 1, entry_id: '999_pwned'}})})).status""",
        f"{url}/entries/-/insert",
    )
    assert status == 405
    page.goto(f"{url}?sql=DELETE+FROM+runs")  # what the SQL box sends
    assert "Statement must be a SELECT" in page.inner_text("body")


def test_the_server_hands_the_cli_a_typed_serving_and_ctrl_c_ends_it(served):
    """browse_catalog says where it serves as a frozen Serving (the view words it) and returns on Ctrl-C."""
    import dataclasses

    from cloudvault.browse.server import BrowseOptions, Serving, browse_catalog

    db, _ = served
    seen = []

    def serving(where: Serving) -> None:
        seen.append(where)
        raise KeyboardInterrupt  # Ctrl-C as soon as the URL is said

    assert browse_catalog(BrowseOptions(db, "127.0.0.1", 0, open_browser=False), serving) is None
    (where,) = seen
    assert dataclasses.is_dataclass(where) and where.__dataclass_params__.frozen
    assert where.url.startswith("http://127.0.0.1:") and where.url.endswith("/catalog") and where.loopback
    assert (where.catalog, where.host) == (str(db), "127.0.0.1")
