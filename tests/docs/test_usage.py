"""The Usage blocks of docs/commands/ are `vault COMMAND --help` as it prints today (docs/make_usage.py writes
them): every command of the grammar has a page, and no page shows an option the command lost or lacks one it has."""

from __future__ import annotations


def test_every_command_has_a_page_whose_usage_is_its_help(make_usage):
    words = make_usage.commands()
    assert ("restore", "env") in words and ("index",) in words and ("umount",) in words
    differ = []
    for command in words:
        path = make_usage.page(command)
        assert path.exists(), f"vault {' '.join(command)} has no page {path.name}: run python docs/make_usage.py"
        if make_usage.help_text(command) not in make_usage.usage_blocks(path.read_text()):
            differ.append(" ".join(command))
    assert not differ, f"usage differs from --help (run python docs/make_usage.py): {differ}"


def test_the_usage_script_checks_and_rewrites_only_the_usage_section(make_usage, tmp_path, monkeypatch):
    page = tmp_path / "verify.md"
    page.write_text("# vault verify\n\n[All commands](../README.md)\n\n## Usage\n\n```text\nusage: old\n```\n\n"
                    "More words.\n\n## Exit codes\n\n0 ok\n")  # fmt: skip
    monkeypatch.setattr(make_usage, "PAGES", tmp_path)
    monkeypatch.setattr(make_usage, "commands", lambda: [("verify",)])
    assert make_usage.main(["--check"]) == 1 and "usage: old" in page.read_text()
    assert make_usage.main([]) == 0
    text = page.read_text()
    assert make_usage.usage_blocks(text) == [make_usage.help_text(("verify",))]
    assert text.startswith("# vault verify\n\n[All commands](../README.md)\n\n## Usage\n\n```text\nusage: vault verify")
    assert text.endswith("```\n\nMore words.\n\n## Exit codes\n\n0 ok\n")
    assert make_usage.main(["--check"]) == 0


def test_a_new_command_gets_a_page_that_the_script_then_leaves_alone(make_usage, tmp_path, monkeypatch):
    """A command another change adds (without a page) gets one from the script; a second run changes nothing."""
    pages = tmp_path / "commands"
    pages.mkdir()
    monkeypatch.setattr(make_usage, "PAGES", pages)
    monkeypatch.setattr(make_usage, "commands", lambda: [("ls",), ("umount",), ("mount",)])
    assert make_usage.main([]) == 0
    assert sorted(p.name for p in pages.iterdir()) == ["ls.md", "mount.md"]
    blocks = make_usage.usage_blocks((pages / "mount.md").read_text())
    assert [b.split()[2] for b in blocks] == ["umount", "mount"]  # in the grammar's order
    assert make_usage.main(["--check"]) == 0


def test_a_command_with_optional_sub_commands_is_a_command_too_and_shares_its_page(make_usage, tmp_path, monkeypatch):
    """`vault mirrors` runs alone and `vault mirrors rm` is documented on mirrors.md; `vault restore` is only a
    group (its kind is required), and `vault restore env` has its own page."""
    from cloudvault.cli.main import VaultParser

    def build_parser(only=None):
        parser = VaultParser(prog="vault")
        sub = parser.add_subparsers(dest="command")
        mirrors = sub.add_parser("mirrors").add_subparsers(dest="action")
        mirrors.add_parser("rm")
        restore = sub.add_parser("restore").add_subparsers(dest="kind", required=True)
        restore.add_parser("env")
        return parser

    monkeypatch.setattr("cloudvault.cli.main.build_parser", build_parser)
    monkeypatch.setattr(make_usage, "PAGES", tmp_path)
    assert make_usage.commands() == [("mirrors",), ("mirrors", "rm"), ("restore", "env")]
    (tmp_path / "mirrors.md").write_text("# vault mirrors\n")
    (tmp_path / "restore-env.md").write_text("# vault restore env\n")
    pages = [make_usage.page(words).name for words in make_usage.commands()]
    assert pages == ["mirrors.md", "mirrors.md", "restore-env.md"]
