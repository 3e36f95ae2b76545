"""The wire's models (pydantic, at the HTTP edge only): one module for each router of
:mod:`gitmem.api.routers`.
"""
