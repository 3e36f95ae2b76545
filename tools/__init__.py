"""The project's own development tools (``make test`` runs them); not installed with gitmem."""
