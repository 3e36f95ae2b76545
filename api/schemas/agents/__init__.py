"""The wire models of :mod:`gitmem.api.routers.agents`, one module a router: :mod:`.workers`,
:mod:`.tasks`, :mod:`.dreams` and :mod:`.profiles`.
"""
