"""The client side. Imports nothing from the server side.

``gitmem mount`` (:mod:`.mount`): its folder (:mod:`.folder`), its syncer (:mod:`.syncer`, changes from
elsewhere in :mod:`.pull`, quiet periods in :mod:`.debounce`), the three-way merge of a note edited on
both sides (:mod:`.merge`) and what it talks to: a :mod:`.remote` (the SDK's memory stores) or a
profile's bank (:mod:`.bank_remote`, and the agent session hooks in :mod:`.bank_session`). The MCP
stdio bridge (:mod:`.mcp_bridge`).
"""
