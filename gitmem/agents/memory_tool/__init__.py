"""The memory tool: Claude's six memory commands on a store (:mod:`.tool`), its paths (:mod:`.paths`),
its words (:mod:`.text`) and its adapter for the official SDK's tool runner (:mod:`.sdk`).
"""
