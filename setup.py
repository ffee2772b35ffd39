"""The native parts, optional: BLAKE3 with piece hashes in one pass (cloudvault/_b3tree.c), and many small members'
BLAKE3 in one call (cloudvault/_plainruns.c), both on the BLAKE3 compression core they include (cloudvault/_b3core.h).
Where they cannot be built (no C compiler, no Python headers), the install goes on without them: cloudvault/pieces.py
hashes the pieces in a second pass and cloudvault/hashing.py each small member alone with the `blake3` package (the
speed of before; the same verification)."""

from setuptools import Extension, setup

FLAGS = ["-O3", "-std=c11"]
CORE = ["cloudvault/_b3core.h"]  # shipped in the sdist by pyproject's package-data (setuptools leaves depends out)
setup(ext_modules=[Extension("cloudvault._b3tree", ["cloudvault/_b3tree.c"], depends=CORE, optional=True,
                             extra_compile_args=FLAGS),
                   Extension("cloudvault._plainruns", ["cloudvault/_plainruns.c"], depends=CORE, optional=True,
                             extra_compile_args=FLAGS)])  # fmt: skip
