"""The one native part, optional: BLAKE3 with piece hashes in one pass (cloudvault/_b3tree.c). Where it cannot be
built (no C compiler, no Python headers), the install goes on without it and cloudvault/pieces.py hashes the pieces
in a second pass with the `blake3` package (the speed of before; the same verification)."""

from setuptools import Extension, setup

setup(ext_modules=[Extension("cloudvault._b3tree", ["cloudvault/_b3tree.c"], optional=True,
                             extra_compile_args=["-O3", "-std=c11"])])
