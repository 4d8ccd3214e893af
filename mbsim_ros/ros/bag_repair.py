"""`mbsim bag repair DIR`: make a bag whose recording was cut off (SIGKILL, power loss, an
out-of-memory kill) readable again, keeping every chunk that reached the file.

A bag is written chunk by chunk (ros/bag.py); its summary (schemas, channels, chunk indexes,
statistics), its footer and metadata.yaml come only at close. Without them rosbags refuses the
bag (no metadata.yaml, then no footer magic) and the mcap reader fails on the footer. Repair
scans the .mcap from its header: each Chunk record that is wholly in the file and decodes (its
records parse, its compression inflates) is kept with its MessageIndex records (written anew when
the kill cut them off); the file is cut after the last such chunk, the incomplete tail dropped,
and the summary and footer are appended as rosbags' writer writes them (its McapWriter.close,
given the scanned schemas, channels and chunk indexes); then metadata.yaml is written. The result
is a complete rosbag2 bag: rosbags, the mcap reader and `ros2 bag` read it.

A complete bag (metadata.yaml present and rosbags opens it) is left as it is.
"""
from __future__ import annotations

import mmap
import os
import struct
from collections import defaultdict
from dataclasses import dataclass, field
from io import BytesIO
from pathlib import Path

import yaml

__all__ = ["RepairError", "Repaired", "repair_bag"]

MAGIC = b"\x89MCAP0\r\n"
_SCHEMA, _CHANNEL, _MESSAGE, _CHUNK, _MESSAGE_INDEX = 0x03, 0x04, 0x05, 0x06, 0x07
_PADDING = 0xB0          # ros/bag.py's record before a block-aligned chunk (readers skip it)
_U16, _U32, _U64 = struct.Struct("<H"), struct.Struct("<I"), struct.Struct("<Q")
_RECORD_HEAD = struct.Struct("<BQ")
_MESSAGE_HEAD = struct.Struct("<HIQQ")
_CHUNK_HEAD = struct.Struct("<QQQI")


class RepairError(Exception):
    """What is not a bag this can repair: one line naming the path."""


@dataclass
class Repaired:
    path: Path                      # the .mcap
    already_complete: bool = False
    messages: int = 0
    chunks: int = 0
    start_ns: int = 0
    end_ns: int = 0
    dropped_bytes: int = 0          # the incomplete tail cut off
    counts: dict = field(default_factory=dict)      # topic -> messages kept


@dataclass
class _Chunk:
    start: int                      # file offset of the Chunk record
    end: int                        # ... after it
    t0: int
    t1: int
    compression: str
    stored: int                     # compressed size
    size: int                       # uncompressed size
    index: dict                     # channel -> [(log time, offset in the records)]


def repair_bag(directory, ros_distro: str = "jazzy") -> Repaired:
    """Repair the bag in `directory` in place (see the module's text). RepairError, one line, for
    what is not a rosbag2 MCAP directory."""
    directory = Path(directory)
    mcap = _the_mcap(directory)
    if _complete(directory):
        return Repaired(mcap, already_complete=True)
    with open(mcap, "r+b") as f:
        size = os.fstat(f.fileno()).st_size
        if size < len(MAGIC):
            raise RepairError(f"{mcap}: {size} bytes, not even the MCAP magic: nothing to recover")
        with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:
            scan = _scan(mcap, data)
        f.seek(scan.keep)
        f.truncate()
        trailer = BytesIO()
        for chunk in scan.unindexed:
            _write_message_indexes(trailer, chunk, scan.offsets)   # where the kill cut them off
        f.write(trailer.getbuffer())
        summary = _summary_writer(f, scan)
        counts = defaultdict(int)
        for chunk in scan.chunks:
            for cid, entries in chunk.index.items():
                counts[cid] += len(entries)
        times = [(c.t0, c.t1) for c in scan.chunks if c.index]
        start = min((a for a, _ in times), default=0)
        end = max((b for _, b in times), default=0)
        summary.channel_stats = {cid: counts.get(cid, 0) for cid in scan.channels}
        summary.message_start_time = start if times else 2 ** 63 - 1
        summary.message_end_time = end
        info = _metadata(directory, mcap, scan, counts, start, end, ros_distro)
        summary.close(8, yaml.safe_dump(info, sort_keys=False).strip())
    meta = directory / "metadata.yaml"
    tmp = meta.with_suffix(".yaml.tmp")
    tmp.write_text(yaml.safe_dump({"rosbag2_bagfile_information": info}, sort_keys=False), "utf8")
    os.replace(tmp, meta)
    topics = {cid: ch.topic for cid, ch in scan.channels.items()}
    return Repaired(mcap, messages=sum(counts.values()), chunks=len(scan.chunks), start_ns=start, end_ns=end,
                    dropped_bytes=size - scan.keep,
                    counts={topics[cid]: n for cid, n in counts.items()})


def _the_mcap(directory: Path) -> Path:
    if not directory.is_dir():
        raise RepairError(f"{directory}: no such bag directory")
    files = sorted(directory.glob("*.mcap"))
    if len(files) != 1:
        raise RepairError(f"{directory}: expected one .mcap file in the bag directory, found {len(files)}")
    return files[0]


def _complete(directory: Path) -> bool:
    if not (directory / "metadata.yaml").exists():
        return False
    from rosbags.rosbag2 import Reader
    try:
        with Reader(directory):
            return True
    except Exception:       # rosbags' errors of every kind: a bag it cannot open needs repair
        return False


@dataclass
class _Scan:
    keep: int = 0                                   # bytes of the file kept
    schemas: dict = field(default_factory=dict)    # id -> rosbags Schema
    channels: dict = field(default_factory=dict)   # id -> rosbags Channel
    chunks: list = field(default_factory=list)     # _Chunk, in file order
    offsets: dict = field(default_factory=dict)    # id(chunk) -> {channel: MessageIndex record offset}
    unindexed: list = field(default_factory=list)  # the last chunk when its MessageIndex records were cut off


def _scan(path, data) -> _Scan:
    """The complete chunks of an MCAP file's data section, from its start to the first record
    that is cut off or does not decode (or the summary)."""
    from rosbags.rosbag2.storage_mcap import Channel, Schema
    if data[:8] != MAGIC:
        raise RepairError(f"{path}: not an MCAP file (its first bytes are not the MCAP magic)")
    scan = _Scan()
    end = len(data)
    at = 8
    head = _record(data, at)
    if head is None or head[0] != 0x01:
        raise RepairError(f"{path}: the MCAP header record is missing or cut off: nothing to recover")
    at = scan.keep = head[2]
    pending = None          # the last chunk and its channels whose MessageIndex records are still to come
    while True:
        rec = _record(data, at)
        if rec is None:
            break
        op, body, nxt = rec
        if op == _CHUNK:
            chunk = _read_chunk(data, body, nxt, at, scan, Schema, Channel)
            if chunk is None:
                break
            # (a chunk before it whose MessageIndex records were incomplete keeps those it has:
            # they are optional in MCAP; our writer always writes them all)
            scan.chunks.append(chunk)
            scan.offsets[id(chunk)] = {}
            pending = (chunk, set(chunk.index))
            scan.keep = nxt
            if not pending[1]:
                pending = None
        elif op == _MESSAGE_INDEX and pending is not None and len(data) >= body + 2:
            cid = _U16.unpack_from(data, body)[0]
            scan.offsets[id(pending[0])][cid] = at
            pending[1].discard(cid)
            if not pending[1]:
                scan.keep = nxt
                pending = None
        elif op == _PADDING and pending is None:
            pass                     # kept only when a chunk follows it
        elif op in (_SCHEMA, _CHANNEL) and pending is None:
            if not _read_definition(data, op, body, nxt, scan, Schema, Channel):
                break
            scan.keep = nxt
        else:
            break                    # a summary record (a close that was cut off) or garbage: the data ends
        at = nxt
        if at >= end:
            break
    if pending is not None:
        scan.keep = pending[0].end       # its MessageIndex records are rewritten whole
        scan.offsets[id(pending[0])] = {}
        scan.unindexed.append(pending[0])
    return scan


def _record(data, at):
    """(opcode, body offset, next record's offset) of the record at `at`, or None if cut off."""
    if at + 9 > len(data):
        return None
    op, length = _RECORD_HEAD.unpack_from(data, at)
    nxt = at + 9 + length
    if op == 0 or nxt > len(data):
        return None
    return op, at + 9, nxt


def _string(data, at, limit):
    n = _U32.unpack_from(data, at)[0]
    if at + 4 + n > limit:
        raise ValueError("string past its record")
    return bytes(data[at + 4:at + 4 + n]).decode(), at + 4 + n


def _read_definition(data, op, at, limit, scan, Schema, Channel) -> bool:
    """A Schema or Channel record into the scan; False where it does not parse."""
    try:
        key = _U16.unpack_from(data, at)[0]
        if op == _SCHEMA:
            name, p = _string(data, at + 2, limit)
            encoding, p = _string(data, p, limit)
            n = _U32.unpack_from(data, p)[0]
            scan.schemas[key] = Schema(key, name, encoding, bytes(data[p + 4:p + 4 + n]).decode())
        else:
            schema_id = _U16.unpack_from(data, at + 2)[0]
            topic, p = _string(data, at + 4, limit)
            encoding, p = _string(data, p, limit)
            n = _U32.unpack_from(data, p)[0]
            schema = scan.schemas.get(schema_id)
            if schema is None or p + 4 + n > limit:
                return False
            scan.channels[key] = Channel(key, schema.name, topic, encoding, bytes(data[p + 4:p + 4 + n]))
        return True
    except (struct.error, ValueError, UnicodeDecodeError):
        return False


def _read_chunk(data, at, limit, start, scan, Schema, Channel):
    """The Chunk record whose body starts at `at` as a _Chunk, its schemas and channels into the
    scan; None where it does not decode."""
    from rosbags.rosbag2.storage_mcap import decompress
    try:
        t0, t1, size, crc = _CHUNK_HEAD.unpack_from(data, at)
        compression, p = _string(data, at + 28, limit)
        stored = _U64.unpack_from(data, p)[0]
        if p + 8 + stored != limit:
            return None
        body = data[p + 8:limit]
        records = memoryview(decompress(body, compression, size, crc) if compression or crc else body)
    except Exception:        # struct.error, rosbags' ReaderError, zstd's errors: a chunk that does not decode
        return None
    schemas, channels = dict(scan.schemas), dict(scan.channels)
    probe = _Scan(schemas=schemas, channels=channels)
    index = defaultdict(list)
    q = 0
    while q < len(records):
        rec = _record(records, q)
        if rec is None:
            return None
        op, body_at, nxt = rec
        if op == _MESSAGE:
            if nxt - body_at < 22:
                return None
            cid, _, log_time, _ = _MESSAGE_HEAD.unpack_from(records, body_at)
            if cid not in channels:
                return None
            index[cid].append((log_time, q))
        elif op in (_SCHEMA, _CHANNEL):
            if not _read_definition(records, op, body_at, nxt, probe, Schema, Channel):
                return None
        q = nxt
    scan.schemas, scan.channels = schemas, channels
    return _Chunk(start, limit, t0, t1, compression, stored, size, dict(index))


def _write_message_indexes(out, chunk, offsets):
    """The chunk's MessageIndex records (as rosbags writes them), appended at the end of what
    is kept; their file offsets into `offsets` for the chunk index."""
    base = chunk.end          # they follow the chunk directly (what followed it was cut off)
    mine = offsets.setdefault(id(chunk), {})
    for cid, entries in chunk.index.items():
        mine[cid] = base + out.tell()
        out.write(_RECORD_HEAD.pack(_MESSAGE_INDEX, 6 + 16 * len(entries)))
        out.write(_U16.pack(cid) + _U32.pack(16 * len(entries)))
        out.write(b"".join(struct.pack("<QQ", t, o) for t, o in entries))


def _summary_writer(f, scan):
    """rosbags' McapWriter set up to write the summary of the scanned data at f's position (its
    close() writes exactly what a bag closed normally ends with)."""
    from rosbags.rosbag2.storage_mcap import McapWriter, PendingChunk
    w = McapWriter.__new__(McapWriter)
    w.path, w.bio = Path(f.name), f
    w.schemas = list(scan.schemas.values())
    w.channels = list(scan.channels.values())
    w.chunk = PendingChunk(2 ** 63 - 1, 0, BytesIO(), defaultdict(list))
    w.compression = next((c.compression for c in scan.chunks), "")
    w.chunks = []
    for chunk in scan.chunks:
        offsets = scan.offsets.get(id(chunk), {})
        index_end = _index_end(chunk, offsets)
        rec = BytesIO()
        rec.write(struct.pack("<QQQQ", chunk.t0, chunk.t1, chunk.start, chunk.end - chunk.start))
        rec.write(_U32.pack(10 * len(offsets)))
        for cid, offset in offsets.items():
            rec.write(_U16.pack(cid) + _U64.pack(offset))
        rec.write(_U64.pack(index_end - chunk.end))
        rec.write(_U32.pack(len(chunk.compression)) + chunk.compression.encode())
        rec.write(struct.pack("<QQ", chunk.stored, chunk.size))
        w.chunks.append(rec)
    return w


def _index_end(chunk, offsets):
    """The file offset after the chunk's MessageIndex records."""
    if not offsets:
        return chunk.end
    last = max(offsets.items(), key=lambda kv: kv[1])
    return last[1] + 9 + 6 + 16 * len(chunk.index[last[0]])


def _metadata(directory, mcap, scan, counts, start, end, ros_distro):
    """metadata.yaml's rosbag2_bagfile_information (version 8), as rosbags' Writer writes it."""
    from .messages import TYPESTORE
    total = sum(counts.values())
    duration = max(0, end - start)
    topics = []
    for cid, ch in scan.channels.items():
        try:
            digest = TYPESTORE.hash_rihs01(ch.schema)
        except Exception:         # a type the typestore does not know: no hash, as rosbag2 allows
            digest = ""
        topics.append({"topic_metadata": {"name": ch.topic, "type": ch.schema,
                                          "serialization_format": ch.message_encoding,
                                          "offered_qos_profiles": _qos_text(ch.metadata),
                                          "type_description_hash": digest},
                       "message_count": counts.get(cid, 0)})
    return {"version": 8, "storage_identifier": "mcap", "relative_file_paths": [mcap.name],
            "duration": {"nanoseconds": duration}, "starting_time": {"nanoseconds_since_epoch": start},
            "message_count": total, "topics_with_message_count": topics,
            "compression_format": "", "compression_mode": "",
            "files": [{"path": mcap.name, "starting_time": {"nanoseconds_since_epoch": start},
                       "duration": {"nanoseconds": duration}, "message_count": total}],
            "custom_data": None, "ros_distro": ros_distro}


def _qos_text(metadata: bytes) -> str:
    """The channel's offered_qos_profiles (rosbags stores the v8 text in the channel's metadata:
    its key-value pairs, as rosbags' Channel holds them, without the map's length)."""
    try:
        p, out = 0, {}
        while p < len(metadata):
            key, p = _string(metadata, p, len(metadata))
            value, p = _string(metadata, p, len(metadata))
            out[key] = value
        return out.get("offered_qos_profiles", "")
    except (struct.error, ValueError, UnicodeDecodeError):
        return ""
