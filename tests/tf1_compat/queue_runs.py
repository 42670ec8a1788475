"""Running a queue-fed TF1 pipeline to its end, as the tests of readers and decoders do."""

from __future__ import annotations

import trainer as tf


def run_to_the_end(sess, fetch, limit: int = 10_000) -> list:
    """Run ``fetch`` until the input runs out, with the queue runners going; joins them (10 s at most)."""
    coord = tf.train.Coordinator()
    threads = tf.train.start_queue_runners(sess=sess, coord=coord)
    results = []
    try:
        while not coord.should_stop() and len(results) < limit:
            results.append(sess.run(fetch))
    except tf.errors.OutOfRangeError:
        pass
    finally:
        coord.request_stop()
        coord.join(threads, stop_grace_period_secs=10)
    assert len(results) < limit, "the input never ran out"
    return results
