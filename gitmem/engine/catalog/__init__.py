"""The catalog: workspaces, keys, users and stores' rows (:mod:`.catalog`), and what a node may keep of
them between requests (:mod:`.cache`); the Git addresses a person commits with (:mod:`.user_emails`);
the ledger of erasures a restore erases again (:mod:`.erasures`).
"""
