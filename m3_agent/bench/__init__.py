"""`m3 bench …`: the benchmarks of every package, kept apart from the product (no node imports them)."""
