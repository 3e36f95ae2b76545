"""Commands for agents' work: ``workers``, ``tasks`` (:mod:`.tasks`); ``dreams`` (:mod:`.dreams`);
``profiles``, ``prompt`` (:mod:`.profiles`); and ``mcp``, the stdio bridge for a desktop client
(:mod:`.mcp`)."""
