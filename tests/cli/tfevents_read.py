#!/usr/bin/python3
"""An independent reader of TensorBoard event files, for tests/cli/tst_export_files.

    tfevents_read.py PROTO LOGDIR

Reads every LOGDIR/<run>/events.out.tfevents.* (one file per run), checks the TFRecord framing
(u64 LE length, u32 LE masked CRC-32C of the length bytes, data, u32 LE masked CRC-32C of the
data; TensorFlow's TFRecord documentation) with crcmod's CRC-32C (not ShardLab's code), and
decodes each record as a tensorflow.Event with the real protobuf library: PROTO (tb_event.proto,
TensorBoard's field numbers) is compiled with protoc into a temporary folder. The first record
must be the file_version event "brain.Event:2", every later one a summary of simple values.

Prints JSON on stdout: {"runs": {"<run>": {"file": NAME, "records": N,
"scalars": {TAG: [[step, value, wall_time], ...]}}}}.
Exit status: 0 read, 1 a file is malformed (one line on stderr: file, byte offset, what),
2 a tool or module is missing (crcmod, protobuf, protoc: the caller skips).
"""
import json
import os
import struct
import subprocess
import sys
import tempfile

try:
    import crcmod.predefined
    from google.protobuf.message import DecodeError
except ImportError as e:  # the Debian packages python3-crcmod and python3-protobuf
    print(f"missing Python module: {e.name} (apt-get install python3-crcmod python3-protobuf)",
          file=sys.stderr)
    sys.exit(2)

CRC32C = crcmod.predefined.mkCrcFun("crc-32c")


def masked(data):
    crc = CRC32C(data)
    return ((((crc >> 15) | (crc << 17)) & 0xFFFFFFFF) + 0xA282EAD8) & 0xFFFFFFFF


class Malformed(Exception):
    pass


def load_messages(proto):
    out = tempfile.mkdtemp(prefix="tb_proto_")
    folder, name = os.path.split(os.path.abspath(proto))
    try:
        subprocess.run(["protoc", f"--proto_path={folder}", f"--python_out={out}", name],
                       check=True, capture_output=True, text=True)
    except FileNotFoundError:
        print("missing program: protoc (apt-get install protobuf-compiler)", file=sys.stderr)
        sys.exit(2)
    except subprocess.CalledProcessError as e:
        print(f"protoc failed on {proto}: {e.stderr.strip()}", file=sys.stderr)
        sys.exit(2)
    sys.path.insert(0, out)
    module = __import__(os.path.splitext(name)[0] + "_pb2")
    return module.Event


def records(path):
    """Yields (offset, data) for each record; Malformed on a bad length, CRC or a cut tail."""
    with open(path, "rb") as f:
        blob = f.read()
    pos = 0
    while pos < len(blob):
        if len(blob) - pos < 12:
            raise Malformed(f"{path}: {len(blob) - pos} bytes at offset {pos}: a cut record header")
        length_bytes = blob[pos:pos + 8]
        (length,) = struct.unpack("<Q", length_bytes)
        (length_crc,) = struct.unpack("<I", blob[pos + 8:pos + 12])
        if length_crc != masked(length_bytes):
            raise Malformed(f"{path}: record at offset {pos}: length CRC mismatch "
                            f"(stored {length_crc:#010x}, computed {masked(length_bytes):#010x})")
        start, end = pos + 12, pos + 12 + length
        if end + 4 > len(blob):
            raise Malformed(f"{path}: record at offset {pos}: {length} bytes of data cut short")
        data = blob[start:end]
        (data_crc,) = struct.unpack("<I", blob[end:end + 4])
        if data_crc != masked(data):
            raise Malformed(f"{path}: record at offset {pos}: data CRC mismatch "
                            f"(stored {data_crc:#010x}, computed {masked(data):#010x})")
        yield pos, data
        pos = end + 4


def read_run(Event, path):
    scalars = {}
    count = 0
    for offset, data in records(path):
        event = Event()
        try:
            event.ParseFromString(data)
        except DecodeError as e:
            raise Malformed(f"{path}: record at offset {offset}: not an Event: {e}")
        what = event.WhichOneof("what")
        if count == 0:
            if what != "file_version" or event.file_version != "brain.Event:2":
                raise Malformed(f"{path}: the first record is not file_version brain.Event:2 "
                                f"(got {what}: {event})")
        elif what != "summary":
            raise Malformed(f"{path}: record at offset {offset} holds {what}, not a summary")
        else:
            if not event.summary.value:
                raise Malformed(f"{path}: record at offset {offset}: an empty summary")
            for v in event.summary.value:
                if v.WhichOneof("value") != "simple_value" or not v.tag:
                    raise Malformed(f"{path}: record at offset {offset}: value {v} is not a "
                                    "tagged simple_value")
                scalars.setdefault(v.tag, []).append([event.step, v.simple_value,
                                                      event.wall_time])
        count += 1
    if count == 0:
        raise Malformed(f"{path}: no records")
    return count, scalars


def main():
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    Event = load_messages(sys.argv[1])
    logdir = sys.argv[2]
    runs = {}
    try:
        for run in sorted(os.listdir(logdir)):
            folder = os.path.join(logdir, run)
            if not os.path.isdir(folder):
                continue
            files = [f for f in os.listdir(folder) if f.startswith("events.out.tfevents.")]
            if len(files) != 1:
                raise Malformed(f"{folder}: {len(files)} event files, expected one: {files}")
            count, scalars = read_run(Event, os.path.join(folder, files[0]))
            runs[run] = {"file": files[0], "records": count, "scalars": scalars}
    except Malformed as e:
        print(e, file=sys.stderr)
        return 1
    json.dump({"runs": runs}, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
