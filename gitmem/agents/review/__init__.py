"""The steward's review: approvals and the review mark (:mod:`.review`), and a store as it stood at
its mark (:mod:`.approved_view`), which tasks read under ``read_approved_only``.
"""
