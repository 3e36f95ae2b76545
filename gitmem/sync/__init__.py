"""The client side: remotes, `gitmem mount`, three-way merge. Imports nothing from the server side."""
