"""`vault mount`: the catalog's mirrors as a read-only FUSE folder, archives opened in place, every read verified.

tree.py builds the folder tree from the catalog alone; frames.py reads archive bytes by the frame table through a
bounded cache of decoded frames; fs.py answers the FUSE operations; session.py mounts and unmounts.
"""
