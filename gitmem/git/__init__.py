"""The Git layer (plumbing): repositories, objects and packs, commits, history, rewrite, pushes."""
