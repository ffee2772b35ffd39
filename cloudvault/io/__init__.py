"""Members in and out: members.py reads verified byte streams of archive members and mirror files; landing.py is
the one safe writer of them into a folder."""
