"""Configuration: every ``GITMEM_*`` setting checked once where a program starts (:mod:`.settings`),
turned into typed values, one frozen dataclass a concern (:mod:`.values`: :class:`~.values.Config`);
its environment's names (:mod:`.names`); the typed values handed down to the processes Git starts per
push (:mod:`.handoff`); what they become: the home, the push hooks' options, the dreamer
(:mod:`.home`); and the table of them docs/settings.md shows (:mod:`.table`). Below the program's
start nothing reads a setting by name: each takes the typed part it needs.
"""
