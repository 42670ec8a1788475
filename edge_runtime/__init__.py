"""flowstack edge_runtime."""
