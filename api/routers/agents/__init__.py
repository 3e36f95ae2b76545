"""The agents' work: :mod:`.workers`, :mod:`.tasks` (their frozen store lists, memory views and
events), the SDK's :mod:`.dreams`, and a user's :mod:`.profiles` with their memory banks.
"""
