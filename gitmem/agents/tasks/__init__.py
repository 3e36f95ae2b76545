"""Workers and tasks: workers (:mod:`.workers`), tasks and which stores they read (:mod:`.tasks`,
:mod:`.scope`), their values (:mod:`.values`), tables (:mod:`.tables`), event logs (:mod:`.events`) and the
memory section of a task's context (:mod:`.context`).
"""
