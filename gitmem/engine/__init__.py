"""The engine (porcelain): the data home, catalog, stores, their index, retention, audit, access."""
