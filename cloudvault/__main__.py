"""`python -m cloudvault` runs the `vault` command."""

from cloudvault.cli.main import console_main

console_main()
