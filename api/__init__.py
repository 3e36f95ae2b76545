"""gitmem's HTTP API: a thin FastAPI layer over the engine, wire-compatible with the official SDK.

It routes, authenticates, (de)serialises and maps engine errors to the error envelope. It knows
nothing of Git: every rule lives in ``gitmem/``.
"""
