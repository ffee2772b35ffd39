"""The command line: one argparse grammar (main.py), one module per command, output through ui.py."""
