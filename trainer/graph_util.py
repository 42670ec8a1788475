"""``tf.graph_util``: freezing a trained graph the TF1 way, on GraphDefs (trainer/graph_def.py).

    frozen = tf.graph_util.convert_variables_to_constants(sess, sess.graph.as_graph_def(), ["probabilities"])

keeps what the named outputs need and replaces each variable by a constant holding its value in
the session, as TensorFlow's does.
"""

from __future__ import annotations

from trainer import tf_logging
from trainer.graph_def import GraphDef, import_graph_def

__all__ = ["convert_variables_to_constants", "extract_sub_graph", "import_graph_def", "remove_training_nodes"]

_VARIABLE_OPS = {"Variable", "VariableV2"}


def _node_name(ref: str) -> str:
    return ref.lstrip("^").partition(":")[0]


def extract_sub_graph(graph_def: GraphDef, dest_nodes) -> GraphDef:
    """The nodes ``dest_nodes`` (op names) need, through inputs and control inputs, in graph order."""
    if isinstance(dest_nodes, str):
        raise TypeError("dest_nodes must be a list of node names")
    nodes = {nd["name"]: nd for nd in graph_def.description["nodes"]}
    for name in dest_nodes:
        if _node_name(name) not in nodes:
            raise AssertionError(f"{name} is not in graph")
    keep, stack = set(), [_node_name(n) for n in dest_nodes]
    while stack:
        name = stack.pop()
        if name in keep:
            continue
        keep.add(name)
        nd = nodes[name]
        stack.extend(_node_name(i) for i in nd["inputs"] if i is not None)
        stack.extend(nd["control_inputs"])
    description = dict(graph_def.description)
    description["nodes"] = [nd for nd in graph_def.description["nodes"] if nd["name"] in keep]
    description["collections"] = {k: [n for n in v if n in keep] for k, v in
                                  graph_def.description.get("collections", {}).items()}
    description["loops"] = [lp for lp in graph_def.description.get("loops", []) if set(lp["enters"]) <= keep]
    description["conds"] = [c for c in graph_def.description.get("conds", []) if set(c["merges"]) <= keep]
    used = {v["__array__"] for nd in description["nodes"] for v in nd["attrs"].values()
            if isinstance(v, dict) and "__array__" in v}
    return GraphDef(description, {k: a for k, a in graph_def.arrays.items() if k in used})


def convert_variables_to_constants(sess, input_graph_def: GraphDef, output_node_names, variable_names_whitelist=None,
                                   variable_names_blacklist=None) -> GraphDef:
    """``extract_sub_graph`` to the outputs, each variable then a constant of its value in ``sess``."""
    sub = extract_sub_graph(input_graph_def, output_node_names)
    variables = [nd for nd in sub.description["nodes"] if nd["op"] in _VARIABLE_OPS
                 and (variable_names_whitelist is None or nd["name"] in variable_names_whitelist)
                 and (variable_names_blacklist is None or nd["name"] not in variable_names_blacklist)]
    values = sess.run([sess.graph.tensor(f"{nd['name']}:0") for nd in variables]) if variables else []
    arrays = dict(sub.arrays)
    frozen = {}
    for nd, value in zip(variables, values):
        key = f"{nd['name']}/value"
        arrays[key] = value
        frozen[nd["name"]] = {**nd, "op": "Constant", "domain": "", "inputs": [], "control_inputs": [],
                              "attrs": {"value": {"__array__": key}}}
    description = dict(sub.description)
    description["nodes"] = [frozen.get(nd["name"], nd) for nd in sub.description["nodes"]]
    description["collections"] = {k: [n for n in v if n not in frozen] for k, v in sub.description["collections"].items()}
    tf_logging.info("Froze %d variables.", len(frozen))
    return GraphDef(description, arrays)


def remove_training_nodes(input_graph: GraphDef, protected_nodes=None) -> GraphDef:
    """The graph without Identity and CheckNumerics nodes (their consumers read their input), except
    ``protected_nodes`` and those with control inputs."""
    protected = set(protected_nodes or ())
    passthrough = {nd["name"]: nd["inputs"][0] for nd in input_graph.description["nodes"]
                   if nd["op"] in ("Identity", "CheckNumerics") and nd["name"] not in protected
                   and not nd["control_inputs"] and nd["inputs"] and nd["inputs"][0] is not None}

    def source(ref):
        while ref is not None and _node_name(ref) in passthrough and ref.partition(":")[2] in ("", "0"):
            ref = passthrough[_node_name(ref)]
        return ref

    description = dict(input_graph.description)
    description["nodes"] = [{**nd, "inputs": [source(i) for i in nd["inputs"]]}
                            for nd in input_graph.description["nodes"] if nd["name"] not in passthrough]
    return GraphDef(description, dict(input_graph.arrays))
