"""librdkafka (through Debian's python3-confluent-kafka) with credentials
the cluster refuses.

A producer and a consumer start with the settings given (KEY=VALUE:
security.protocol, sasl.*, ssl.* with a wrong password) and are polled
until librdkafka reports an error through error_cb, or WAIT seconds pass.
Then the producer's flush of one record and the consumer's list_topics are
tried, each bounded, to see how the failure reaches an application that
does not watch error_cb. Prints one JSON object on stdout:

  {"producer": {"errors": [[name, code, fatal, text], ...], "seconds": s,
                "flush_left": n},
   "consumer": {"errors": [...], "seconds": s, "list_topics": text}}

usage: confluent_auth_fail.py BOOTSTRAP TOPIC WAIT [KEY=VALUE ...]
"""
import json
import sys
import time

from confluent_kafka import Consumer, KafkaException, Producer

boot, topic, wait = sys.argv[1], sys.argv[2], float(sys.argv[3])
extra = dict(a.split("=", 1) for a in sys.argv[4:])


def conf(c):
    out = {"bootstrap.servers": boot}
    out.update(extra)
    out.update(c)
    return out


def watch(make, poll):
    """Starts a client, polls it until error_cb has been called or WAIT
    passes; returns the client, the errors and how long the first took."""
    errors = []

    def on_error(e):
        errors.append([e.name(), e.code(), e.fatal(), e.str()])

    start = time.monotonic()
    client = make(on_error)
    first = None
    while time.monotonic() - start < wait:
        poll(client)
        if errors:
            first = time.monotonic() - start
            break
    return client, errors, first


producer, perrs, pfirst = watch(
    lambda cb: Producer(conf({"error_cb": cb, "message.timeout.ms": 5000})),
    lambda p: p.poll(0.2))
producer.produce(topic, value=b"never")
flush_left = producer.flush(10)

consumer, cerrs, cfirst = watch(
    lambda cb: Consumer(conf({"error_cb": cb, "group.id": "auth-fail"})),
    lambda c: c.poll(0.2))
try:
    md = consumer.list_topics(topic, timeout=5)
    listed = "answered: %s" % sorted(md.topics)
except KafkaException as e:
    listed = "%s: %s" % (e.args[0].name(), e.args[0].str())
consumer.close()

json.dump({
    "producer": {"errors": perrs, "seconds": pfirst, "flush_left": flush_left},
    "consumer": {"errors": cerrs, "seconds": cfirst, "list_topics": listed},
}, sys.stdout)
print()
