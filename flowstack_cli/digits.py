"""The digits CNN of ``flowstack demo``: scikit-learn's 8x8 handwritten digits, a conv-BN-conv-BN-pool-
dense-dropout network trained with the flowstack trainer, checkpointed for the exporter.

    (train, test) = load_digits()
    graph, handles = build_cnn()
    accuracy = train_cnn(graph, handles, train, "/tmp/digits", epochs=10)

The same network (batch norm and dropout included) is what ``benchmarks/export_passes.py`` times,
so the exporter is measured on a graph with the training-mode ops it has to rewrite.
"""

from __future__ import annotations

import numpy as np

N_TEST = 360


def load_digits(seed: int = 0):
    """((x_train, y_train), (x_test, y_test)): NCHW float32 images in [0, 1], int64 labels."""
    try:
        from sklearn.datasets import load_digits as sklearn_digits
    except ImportError as exc:
        raise RuntimeError("the digits data set comes with scikit-learn: pip install scikit-learn") from exc
    d = sklearn_digits()
    x = (d.data / 16.0).astype(np.float32).reshape(-1, 1, 8, 8)
    y = d.target.astype(np.int64)
    order = np.random.default_rng(seed).permutation(len(x))
    x, y = x[order], y[order]
    return (x[N_TEST:], y[N_TEST:]), (x[:N_TEST], y[:N_TEST])


def build_cnn(seed: int = 0, batch_norm: bool = True):
    """(graph, handles): images -> conv32-BN-relu -> conv64-BN-relu -> maxpool -> fc128-relu-dropout -> fc10 -> softmax."""
    import trainer as T

    g = T.Graph()
    with g.as_default():
        T.init.set_seed(seed)
        x = T.placeholder(np.float32, (None, 1, 8, 8), name="images")
        y = T.placeholder(np.int64, (None,), name="labels")
        h = x
        for i, filters in enumerate((32, 64), start=1):
            h = T.layers.conv2d(h, filters, 3, padding="same", activation=None if batch_norm else "relu",
                                name=f"conv{i}", data_format="channels_first")
            if batch_norm:
                h = T.nn.relu(T.layers.batch_normalization(h, axis=1, training=True, momentum=0.9, name=f"bn{i}"))
        h = T.layers.flatten(T.layers.max_pooling2d(h, 2, data_format="channels_first"))
        h = T.layers.dropout(T.layers.dense(h, 128, activation="relu", name="fc1"), 0.3, training=True)
        logits = T.layers.dense(h, 10, name="logits")
        probs = T.nn.softmax(logits, name="probabilities")
        loss = T.losses.sparse_softmax_cross_entropy(y, logits)
        step = T.train.get_or_create_global_step()
        # The moving-average updates of batch norm run with every step (their order against the
        # optimizer does not matter: they touch other variables).
        train = T.group(T.train.AdamOptimizer(T.train.exponential_decay(3e-3, step, 100, 0.7)).minimize(loss, global_step=step),
                        *g.get_collection(T.GraphKeys.UPDATE_OPS))
        init = T.global_variables_initializer()
        saver = T.Saver(max_to_keep=1)
    return g, {"x": x, "y": y, "probs": probs, "loss": loss, "train": train, "init": init, "saver": saver, "step": step}


def train_cnn(graph, handles, data, checkpoint_dir: str, epochs: int = 10, batch: int = 64, progress: bool = True,
              seed: int = 1):
    """Train for ``epochs`` with a progress bar on stderr, save a checkpoint (graph included) into
    ``checkpoint_dir``; returns the live session (for freezing or evaluating) and the checkpoint path."""
    import trainer as T

    x, y = data
    session = T.Session(graph)
    session.run(handles["init"])
    steps_per_epoch = -(-len(x) // batch)
    bar = T.summary.ProgressBar(epochs * steps_per_epoch) if progress else None
    rng = np.random.default_rng(seed)
    step = 0
    for _ in range(epochs):
        order = rng.permutation(len(x))
        for i in range(0, len(x), batch):
            b = order[i:i + batch]
            _, loss = session.run([handles["train"], handles["loss"]], {handles["x"]: x[b], handles["y"]: y[b]})
            step += 1
            if bar is not None:
                bar.update(step, loss=float(loss))
    path = handles["saver"].save(session, f"{checkpoint_dir}/model", global_step=handles["step"])
    return session, path
