"""librdkafka (through Debian's python3-confluent-kafka) transactions.

A consumer in group GROUP reads the first 3 of 6 records from IN. A
transactional producer then commits c0, c1 to OUT with the group's offset
3 on IN; aborts a0, a1 with offset 6; commits c2 without offsets. Prints
one JSON object on stdout: what a read_committed and a read_uncommitted
reader find in OUT, and the group's committed offset on IN.

Any further arguments are librdkafka settings, KEY=VALUE (security.protocol,
sasl.*, ssl.*), given to every client.

usage: confluent_txn.py BOOTSTRAP IN OUT GROUP TRANSACTIONAL_ID [KEY=VALUE ...]
"""
import json
import sys
import time

from confluent_kafka import (OFFSET_BEGINNING, Consumer, KafkaError,
                             KafkaException, Producer, TopicPartition)

boot, tin, tout, group, txid = sys.argv[1:6]
extra = dict(a.split("=", 1) for a in sys.argv[6:])
DEADLINE = time.monotonic() + 60
T = 30  # seconds each blocking call may take


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def conf(c):
    """A client's settings: BOOTSTRAP, the command line's extra ones, c."""
    out = {"bootstrap.servers": boot}
    out.update(extra)
    out.update(c)
    return out


def left():
    return max(1.0, DEADLINE - time.monotonic())


# Input: six plain records.
plain = Producer(conf({"acks": "all"}))
for i in range(6):
    plain.produce(tin, key=b"k%d" % i, value=b"in%d" % i, partition=0)
if plain.flush(T) != 0:
    sys.exit("input records not delivered")

group_consumer = Consumer(conf({
    "group.id": group,
    "enable.auto.commit": False,
    "auto.offset.reset": "earliest",
    "isolation.level": "read_committed",
    "session.timeout.ms": 10000,
}))
group_consumer.subscribe([tin])
consumed = []
while len(consumed) < 3 and time.monotonic() < DEADLINE:
    m = group_consumer.poll(1.0)
    if m is None:
        continue
    if m.error():
        raise KafkaException(m.error())
    consumed.append(m)
if len(consumed) < 3:
    sys.exit("group consumer read %d of the 3 input records" % len(consumed))
consumed = consumed[:3]
meta = group_consumer.consumer_group_metadata()

p = Producer(conf({"transactional.id": txid, "transaction.timeout.ms": 30000}))
p.init_transactions(T)

p.begin_transaction()
p.produce(tout, value=b"c0", partition=0)
p.produce(tout, value=b"c1", partition=0)
p.send_offsets_to_transaction([TopicPartition(tin, 0, consumed[-1].offset() + 1)], meta, T)
p.commit_transaction(T)
log("committed the first transaction")

p.begin_transaction()
p.produce(tout, value=b"a0", partition=0)
p.produce(tout, value=b"a1", partition=0)
p.send_offsets_to_transaction([TopicPartition(tin, 0, 6)], meta, T)
p.flush(T)  # the records reach the log before the abort
p.abort_transaction(T)
log("aborted the second transaction")

p.begin_transaction()
p.produce(tout, value=b"c2", partition=0)
p.commit_transaction(T)
log("committed the third transaction")


def read(isolation):
    """Reads OUT from the start until c2 has been read and the partition's
    end (for read_committed: the last stable offset) follows it."""
    c = Consumer(conf({
        "group.id": group + "-reader-" + isolation,
        "enable.auto.commit": False,
        "enable.partition.eof": True,
        "isolation.level": isolation,
    }))
    c.assign([TopicPartition(tout, 0, OFFSET_BEGINNING)])
    got, done = [], False
    while not done and time.monotonic() < DEADLINE:
        m = c.poll(1.0)
        if m is None:
            continue
        if m.error():
            if m.error().code() == KafkaError._PARTITION_EOF:
                done = any(v == "c2" for _, v in got)
                continue
            raise KafkaException(m.error())
        got.append([m.offset(), m.value().decode()])
    c.close()
    return got


read_committed = read("read_committed")
read_uncommitted = read("read_uncommitted")

# The group's offset. The consumer reads read_committed, so librdkafka asks
# for stable offsets only: while the transaction's marker is still on its
# way the coordinator answers UNSTABLE_OFFSET_COMMIT and librdkafka asks
# again, rather than reading an offset from before the commit.
offset = group_consumer.committed([TopicPartition(tin, 0)], left())[0].offset
group_consumer.close()

json.dump({
    "consumed": [[m.offset(), m.value().decode()] for m in consumed],
    "read_committed": read_committed,
    "read_uncommitted": read_uncommitted,
    "committed": offset,
}, sys.stdout)
print()
