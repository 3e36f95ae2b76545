"""The web view at ``/ui/``: server-rendered pages over the engine for people (no script, nothing
fetched from elsewhere, so it works on an air-gapped server). ``router`` is mounted by create_app."""

from api.ui.pages import router

__all__ = ["router"]
