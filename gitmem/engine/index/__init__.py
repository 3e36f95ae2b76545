"""A store's derived index: notes and versions (:mod:`.store_index`, asked by :mod:`.queries`) in a
SQLite file (:mod:`.sqlite_file`) or a PostgreSQL schema (:mod:`.postgres_schema`), and full-text search
(:mod:`.search`, its table :mod:`.search_table`, its query language :mod:`.search_query`); a version's row is
written by :mod:`.version_rows`; an index file keeps hashes and ids as their bytes (:mod:`.stored`).
"""
