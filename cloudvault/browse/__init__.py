"""`vault browse`: the catalog as read-only web pages (Datasette), with a page and canned query per journey."""
