"""flowstack serving."""
