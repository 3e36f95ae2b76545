"""The catalog: a home's workspaces, keys, users and stores' rows (:mod:`.catalog`: ``Catalog``, made of
one class a table: :mod:`.workspaces`, :mod:`.credentials`, :mod:`.stores`, on what they share,
:mod:`.base`), and what a node may keep of them between requests (:mod:`.cache`); the Git addresses a
person commits with (:mod:`.user_emails`); the ledger of erasures a restore erases again (:mod:`.erasures`).
"""
