"""Profiles and their encrypted memory banks."""
