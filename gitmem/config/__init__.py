"""Configuration: every ``GITMEM_*`` setting checked once where a program starts (:mod:`.settings`),
its environment's names (:mod:`.names`), the checked values handed down to the processes Git starts per
push (:mod:`.handoff`), both sources behind one signature (:mod:`.values`), and what they become: the
home, the push hooks' options, the dreamer (:mod:`.home`).
"""
