"""kafka-python (Debian's python3-kafka) against a Kafka listener.

Produces N records to partition 0 of a topic, reads the first K of them in
a consumer group, commits the offset after them and leaves; a second
consumer in the same group then reads the rest. Prints one JSON object on
stdout; logs go to stderr.

usage: kafka_python_group.py BOOTSTRAP TOPIC GROUP N K
"""
import json
import logging
import sys
import time

from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.structs import OffsetAndMetadata

logging.basicConfig(stream=sys.stderr, level=logging.WARNING)
boot, topic, group, n, k = sys.argv[1].split(","), sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
tp = TopicPartition(topic, 0)
DEADLINE = time.monotonic() + 60


def consumer():
    return KafkaConsumer(
        topic,
        bootstrap_servers=boot,
        group_id=group,
        client_id="judge-kafka-python",
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        session_timeout_ms=10000,
        heartbeat_interval_ms=1000,
        max_poll_interval_ms=60000,
        max_poll_records=k,
    )


def take(c, want):
    """Polls c until it has read `want` records or the deadline passes."""
    got = []
    while len(got) < want and time.monotonic() < DEADLINE:
        for recs in c.poll(timeout_ms=500, max_records=want - len(got)).values():
            got.extend(recs)
    return got


def rows(recs):
    return [[r.partition, r.offset, r.key.decode(), r.value.decode()] for r in recs]


p = KafkaProducer(bootstrap_servers=boot, acks="all", client_id="judge-kafka-python")
futures = [p.send(topic, key=b"k%d" % i, value=b"v%d" % i, partition=0) for i in range(n)]
produced = [f.get(timeout=30).offset for f in futures]
p.close(timeout=30)

c1 = consumer()
first = take(c1, k)
if first:
    c1.commit({tp: OffsetAndMetadata(first[-1].offset + 1, "judge")})
committed = c1.committed(tp)
c1.close(autocommit=False)

c2 = consumer()
second = take(c2, n - len(first))
c2.close(autocommit=False)

json.dump({
    "produced": produced,
    "first": rows(first),
    "committed": committed,
    "second": rows(second),
}, sys.stdout)
print()
