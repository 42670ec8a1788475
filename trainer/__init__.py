"""flowstack trainer."""
