"""flowstack flowstack_cli."""
