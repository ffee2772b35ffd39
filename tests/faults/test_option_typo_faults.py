"""A mistyped option is named as such with the option meant, never taken for something else ('unknown command')."""

from __future__ import annotations

import pytest


@pytest.mark.parametrize(
    "argv,typo,meant",
    [
        (["--catlog", "x", "search", "sweep"], "--catlog", "--catalog"),
        (["--catlog=x", "search", "sweep"], "--catlog", "--catalog"),
        (["search", "sweep", "--jsn"], "--jsn", "--json"),
        (["search", "sweep", "--limt", "3"], "--limt", "--limit"),
        (["search", "--catlog", "x", "sweep"], "--catlog", "--catalog"),
        (["extract", "018", "a.json", "--ouput", "x"], "--ouput", "--output"),
        (["restore", "env", "nebius", "--dry-rn"], "--dry-rn", "--dry-run"),
        (["index", "--worker", "2"], "--worker", "--workers"),
    ],
)
def test_a_mistyped_option_is_named_with_the_option_meant(demo_catalog, vault, tally, argv, typo, meant):
    tally("bad_argument")
    r = (
        vault("--catalog", str(demo_catalog), *argv)
        if argv[0] != "--catlog" and argv[0] != "--catlog=x"
        else vault(*argv)
    )
    assert r.code == 2 and r.err.count("\n") == 1, r.err
    assert f"unknown option '{typo}'" in r.err and f"did you mean `{meant}`?" in r.err, r.err
    assert "unknown command" not in r.err


def test_an_option_nothing_is_near_is_named_without_a_guess(demo_catalog, vault):
    r = vault("--catalog", str(demo_catalog), "search", "sweep", "--zzzzzz")
    assert r.code == 2 and "unknown option '--zzzzzz'" in r.err and "did you mean" not in r.err, r.err


def test_a_mistyped_command_still_gets_its_suggestion(demo_catalog, vault):
    r = vault("--catalog", str(demo_catalog), "serch", "sweep")
    assert r.code == 2 and "unknown command 'serch'; did you mean `vault search`?" in r.err, r.err


def test_a_global_option_before_the_command_is_never_said_to_be_misplaced(demo_catalog, vault):
    r = vault("--catalog", str(demo_catalog), "search", "--limit", "abc", "sweep")
    assert r.code == 2 and "--limit" in r.err and "goes before" not in r.err, r.err
    r = vault("--catalog", str(demo_catalog), "search", "sweep", "--catalog", "x")
    assert r.code == 2 and "--catalog goes before the command" in r.err, r.err
