"""The steward's review: approvals (:mod:`.review`) and the review mark, a line of commits on
``refs/reviews/main`` (:mod:`.mark`), and a store as it stood at its mark (:mod:`.approved_view`), which
tasks read under ``read_approved_only`` and write through (:mod:`.approved_writes`).
"""
