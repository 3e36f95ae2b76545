"""Profiles and their encrypted memory banks (:mod:`.profiles`)."""
