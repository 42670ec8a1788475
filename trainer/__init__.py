"""flowstack trainer (bootstrap)."""
from trainer.graph import Graph, get_default_graph  # noqa
