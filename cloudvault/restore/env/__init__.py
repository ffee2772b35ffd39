"""`vault restore env`: the lab's Python environments out of the mirror's env archives, at their recorded prefix
or relocated, verified, and never half-written at the target.

source (the recipe, the envs it finds in the catalog, where each goes, its errors), meta (what an archive says
about itself: conda-meta, pip RECORDs, python and torch builds, GPU fit), venv (pyvenv.cfg and --python), stage
and bulk (members landed into staging, one by one or by a pool of writer threads), rewrite, prefix and elf (the
old prefix moved to the new one in text, binaries and RPATHs), checks (smoke checks inside the restored env),
restore (plan and restore), move (an env vault restored moved to a new prefix).
"""
