"""flowstack exporter."""
