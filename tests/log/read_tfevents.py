#!/usr/bin/python3
"""Reads TensorBoard event files the way TensorBoard does, independently of grpo.c's
writer: TFRecord framing with its masked CRC-32C checks (CRC computed bit by bit
here), each record parsed as a tensorflow Event with Debian's python3-protobuf.

The message types are declared here field by field with the names, numbers and
types of TensorBoard's tensorboard/compat/proto/event.proto and summary.proto
(Event: wall_time 1 double, step 2 int64, file_version 3 string, summary 5;
Summary: value 1 repeated; Summary.Value: tag 1 string, simple_value 2 float,
node_name 7 string), so no generated code is needed.

Usage: /usr/bin/python3 tests/log/read_tfevents.py FILE
Prints one JSON object: {"file_version": ..., "steps": {STEP: {TAG: VALUE}}, "wall_times": [...]}
and exits 1 on any framing, CRC or parse error."""
import json
import struct
import sys

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

F = descriptor_pb2.FieldDescriptorProto


def event_class():
    fdp = descriptor_pb2.FileDescriptorProto(name="grpo_test_event.proto", package="tensorboard", syntax="proto2")  # proto2: fields set to 0 are kept, so a re-serialization must give the same bytes
    summary = fdp.message_type.add(name="Summary")
    value = summary.nested_type.add(name="Value")
    value.field.add(name="tag", number=1, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)
    value.field.add(name="simple_value", number=2, type=F.TYPE_FLOAT, label=F.LABEL_OPTIONAL)
    value.field.add(name="node_name", number=7, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)
    summary.field.add(name="value", number=1, type=F.TYPE_MESSAGE, label=F.LABEL_REPEATED,
                      type_name=".tensorboard.Summary.Value")
    event = fdp.message_type.add(name="Event")
    event.field.add(name="wall_time", number=1, type=F.TYPE_DOUBLE, label=F.LABEL_OPTIONAL)
    event.field.add(name="step", number=2, type=F.TYPE_INT64, label=F.LABEL_OPTIONAL)
    event.field.add(name="file_version", number=3, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)
    event.field.add(name="summary", number=5, type=F.TYPE_MESSAGE, label=F.LABEL_OPTIONAL,
                    type_name=".tensorboard.Summary")
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fdp)
    return message_factory.MessageFactory(pool).GetPrototype(pool.FindMessageTypeByName("tensorboard.Event"))


def crc32c(data):
    crc = 0xFFFFFFFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def masked(crc):
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def main(path):
    assert crc32c(b"123456789") == 0xE3069283  # the CRC-32C check value
    Event = event_class()
    data = open(path, "rb").read()
    pos, out = 0, {"file_version": None, "steps": {}, "wall_times": []}
    while pos < len(data):
        if pos + 12 > len(data):
            sys.exit(f"{path}: truncated record header at byte {pos}")
        header = data[pos:pos + 8]
        (length,) = struct.unpack("<Q", header)
        (hcrc,) = struct.unpack("<I", data[pos + 8:pos + 12])
        if hcrc != masked(crc32c(header)):
            sys.exit(f"{path}: bad length CRC at byte {pos}")
        body = data[pos + 12:pos + 12 + length]
        if len(body) != length or pos + 16 + length > len(data):
            sys.exit(f"{path}: truncated record at byte {pos}")
        (dcrc,) = struct.unpack("<I", data[pos + 12 + length:pos + 16 + length])
        if dcrc != masked(crc32c(body)):
            sys.exit(f"{path}: bad data CRC at byte {pos}")
        ev = Event()
        ev.ParseFromString(body)
        if ev.SerializeToString() != body:
            sys.exit(f"{path}: record at byte {pos} holds fields an Event does not have")
        out["wall_times"].append(ev.wall_time)
        if ev.file_version:
            out["file_version"] = ev.file_version
        if ev.HasField("summary"):
            out["steps"].setdefault(str(ev.step), {}).update({v.tag: v.simple_value for v in ev.summary.value})
        pos += 16 + length
    print(json.dumps(out))


if __name__ == "__main__":
    main(sys.argv[1])
