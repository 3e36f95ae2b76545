"""What a path, a note and a store may be, and the secret detector: rules, no I/O."""
