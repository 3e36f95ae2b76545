"""Configuration: every ``GITMEM_*`` setting checked once where a program starts (:mod:`.settings`),
and the checked values handed down to the processes Git starts per push (:mod:`.handoff`).
"""
