#!/bin/sh
# Redraw the sweep figure from bundle/results.csv with the plotting library at $LIB.
set -eu
: "${LIB:?set LIB to the plotting library folder}"
mkdir -p figs
python3 "$LIB/redraw.py" bundle/results.csv figs
