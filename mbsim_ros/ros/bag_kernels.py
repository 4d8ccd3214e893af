"""The bag's compiled parts: the layouts they share (MCAP records, the pending chunk's state), a
lane's records and index entries, the bytes around a chunk's parts, and memory copies."""
from __future__ import annotations

import numpy as np

from .._kernel_cache import kernel_cache
from .templates import due_rates


_PADDING = 0xB0     # our record between chunks, of zeros (MCAP leaves opcodes 0x80-0xFF to applications;
                    # readers skip records they do not know)
CHUNK_LIMIT = 1 << 20                        # rosbags closes a chunk past 1 MiB
DONE, OVER_LIMIT, INDEX_FULL, _PREPARE = range(4)    # why record_lane returned
NO_TIME = (2 ** 63 - 1, 0)                   # an empty chunk's (start, end), as rosbags writes it
# the pending chunk's state array:
STATE_SIZE, STATE_FIRST, STATE_LAST, STATE_COUNT, STATE_LANE_END, STATE_SEGMENT = range(6)
# its size, first and last log time, messages, the end of its lane records in the lane buffer and
# the start of the lane records not yet in its parts (-1: none)
BLOCK = 4096        # O_DIRECT offsets, lengths and buffer addresses: a multiple of the logical block size


def compile_lane_kernels():
    """Compile the lane and index kernels (or load them from the cache) for the argument types
    they get: in the warm-up, before the first message and the clock."""
    f, i = np.zeros(1), np.zeros(1, np.int64)
    record_lane(np.zeros(64, np.uint8), np.array([0, *NO_TIME, 0, 0, -1], np.int64), np.zeros((1, 3), np.int64),
                 np.zeros(1, np.uint8), np.zeros((0, 9), np.int64), np.zeros((0, 3), np.int64), i,
                 np.zeros((0, 2), np.int64), f, f, f, f, f, i, f, np.ones(1), i, 0.0, -1, 0, 0, CHUNK_LIMIT)
    chunk_layout(np.ones(1, np.int64), np.ones(1, np.uint8), np.zeros((1, 3), np.int64), 0, True,
                  np.frombuffer(b"", np.uint8), -1, np.zeros(8192, np.uint8), np.zeros((2, 6), np.int64),
                  np.zeros((1, 2), np.int64), np.zeros((2, 3), np.int64), np.zeros((1, 2), np.int64))
    for source in (np.zeros(64, np.uint8), np.frombuffer(bytes(64), np.uint8)):   # pixels, and bytes (read-only)
        stream_copy(np.zeros(64, np.uint8), 0, source)


with kernel_cache("ros"):
    from llvmlite import ir
    from numba.core import cgutils, types
    from numba.extending import intrinsic

    from .._kernel_cache import kernel

    @intrinsic
    def _copy_bytes(typingctx, dst, dst_at, src, src_at, n):
        """dst[dst_at:dst_at + n] = src[src_at:src_at + n] (1-D uint8 arrays that do not
        overlap) as one memcpy: numba copies a slice element by element, ~1 ns a byte."""
        def codegen(context, builder, signature, args):
            d, d_at, s, s_at, count = args
            d_data = context.make_array(signature.args[0])(context, builder, d).data
            s_data = context.make_array(signature.args[2])(context, builder, s).data
            cgutils.raw_memcpy(builder, builder.gep(d_data, [d_at]), builder.gep(s_data, [s_at]), count, 1)
        return types.void(dst, types.intp, src, types.intp, types.intp), codegen

    @intrinsic
    def _stream_bytes(typingctx, dst, dst_at, src, n):
        """dst[dst_at:dst_at + n] = src[:n] (1-D uint8 arrays that do not overlap), the 32-byte
        aligned middle of the destination by non-temporal stores (written to memory around the
        caches), its unaligned ends by memcpy; a fence after, so the bytes are in memory before
        a write() hands the buffer to the disk."""
        def codegen(context, builder, signature, args):
            d, d_at, s, count = args
            i64 = ir.IntType(64)
            dst_ptr = builder.gep(context.make_array(signature.args[0])(context, builder, d).data, [d_at])
            src_ptr = context.make_array(signature.args[2])(context, builder, s).data
            head = builder.and_(builder.sub(ir.Constant(i64, 0), builder.ptrtoint(dst_ptr, i64)), ir.Constant(i64, 31))
            head = builder.select(builder.icmp_unsigned(">", head, count), count, head)
            cgutils.raw_memcpy(builder, dst_ptr, src_ptr, head, 1)
            vector = ir.VectorType(i64, 4)
            nontemporal = builder.module.add_metadata([ir.Constant(ir.IntType(32), 1)])
            vectors = builder.udiv(builder.sub(count, head), ir.Constant(i64, 32))
            with cgutils.for_range(builder, vectors) as loop:
                at = builder.add(head, builder.mul(loop.index, ir.Constant(i64, 32)))
                value = builder.load(builder.bitcast(builder.gep(src_ptr, [at]), vector.as_pointer()), align=1)
                store = builder.store(value, builder.bitcast(builder.gep(dst_ptr, [at]), vector.as_pointer()), align=32)
                store.set_metadata("nontemporal", nontemporal)
            done = builder.add(head, builder.mul(vectors, ir.Constant(i64, 32)))
            cgutils.raw_memcpy(builder, builder.gep(dst_ptr, [done]), builder.gep(src_ptr, [done]),
                               builder.sub(count, done), 1)
            builder.fence("seq_cst")
        return types.void(dst, types.intp, src, types.intp), codegen

    @kernel()
    def stream_copy(dst, at, src):
        """dst[at:at + len(src)] = src (1-D uint8 arrays), by _stream_bytes."""
        if at < 0 or at + len(src) > len(dst):
            raise IndexError("stream_copy: the source does not fit at that offset")
        _stream_bytes(dst, at, src, len(src))

    @intrinsic
    def _store(typingctx, buf, at, value, kind):
        """Store `value` as the little-endian type `kind` (a NumPy scalar type: np.uint16,
        np.uint32, np.int32, np.uint64, np.float64) at buf[at:] (1-D uint8), at any alignment:
        one store (the CPUs ROS runs on, x86-64 and aarch64, are little endian and take unaligned
        stores)."""
        target = kind.instance_type if isinstance(kind, types.NumberClass) else kind.dtype

        def codegen(context, builder, signature, args):
            data, offset, x, _ = args
            ptr = builder.gep(context.make_array(signature.args[0])(context, builder, data).data, [offset])
            lltype = context.get_value_type(target)
            ptr = builder.bitcast(ptr, lltype.as_pointer())
            builder.store(context.cast(builder, x, signature.args[2], target), ptr, align=1)
        return types.void(buf, types.intp, value, kind), codegen

    @kernel()
    def chunk_layout(lengths, aligned, index, position, split, compression, stored, out, layout, counts, work,
                      channels):
        """The bytes around a pending chunk's parts (lengths[j]: the j-th part's) in the file from
        `position` on, into out: per Chunk record, where `layout` (a row each) says,
        - out[head:records]: with `split`, a _PADDING record where the piece has a block-aligned
          image (aligned[j]: its pixels are part j), so that those pixels start at a block offset
          of the file; then the Chunk record up to its records (parts[a:b], or the compressed
          body of `stored` bytes when stored >= 0: one piece);
        - out[records:chunk_index]: its MessageIndex records, one per channel in order of the
          channel's first message, as rosbags writes them;
        - out[chunk_index:done]: its ChunkIndex record's content, for the summary.
        Without `split` one Chunk record holds all parts. With it, a piece ends before the
        record of each block-aligned image after the piece's first (whose record starts at a
        part of its own; else the image is copied). index: (channel, log time, offset) per
        message, in order. counts[k]: (channel, messages) over the chunk. work ((parts + 1, 3))
        and channels ((messages, 2)): workspaces. Returns the pieces, the channels in counts and
        the file offset after the last piece."""
        m, n = len(lengths), len(index)
        starts, cuts, pixels = work[:, 0], work[:, 1], work[:, 2]   # part offsets; per piece: its first
        starts[0] = 0                                                # part, its aligned pixels' offset
        for j in range(m):
            starts[j + 1] = starts[j] + lengths[j]
        cuts[0] = 0
        pixels[0] = -1
        pieces = 1
        row = 0
        for j in range(m):
            if not (split and aligned[j]):
                continue
            if pixels[pieces - 1] < 0:
                pixels[pieces - 1] = starts[j] - starts[cuts[pieces - 1]]
                continue
            while row + 1 < n and index[row + 1, 2] <= starts[j]:
                row += 1
            record = index[row, 2]              # the record that holds part j
            first = j
            while first > cuts[pieces - 1] and starts[first] > record:
                first -= 1
            if first > cuts[pieces - 1] and starts[first] == record:
                cuts[pieces] = first
                pixels[pieces] = starts[j] - record
                pieces += 1
                pixels[pieces] = -1
        cuts[pieces] = m
        found = 0
        for i in range(n):
            k = 0
            while k < found and counts[k, 0] != index[i, 0]:
                k += 1
            if k == found:
                counts[k, 0], counts[k, 1] = index[i, 0], 0
                found += 1
            counts[k, 1] += 1
        head_size = 49 + len(compression)      # Chunk: opcode 6, length, start and end time, records' size,
        o, pos, r0 = 0, position, 0            # CRC (0: none), compression, stored size
        for p in range(pieces):
            a, b = cuts[p], cuts[p + 1]
            offset = starts[a]
            size = starts[b] - offset
            body = size if stored < 0 else stored
            r1 = r0
            while r1 < n and index[r1, 2] < starts[b]:
                r1 += 1
            t0, t1 = np.int64(2 ** 63 - 1), np.int64(0)       # an empty chunk's, as rosbags writes them
            for i in range(r0, r1):
                t0 = min(t0, index[i, 1])
                t1 = max(t1, index[i, 1])
            layout[p, 0], layout[p, 1], layout[p, 2] = a, b, o
            pad = 0
            if split and pixels[p] >= 0:
                pad = -(pos + head_size + pixels[p]) % BLOCK
                if 0 < pad < 9:                      # (a record is at least its opcode and length)
                    pad += BLOCK
            if pad:
                out[o] = _PADDING
                _store(out, o + 1, pad - 9, np.uint64)
                out[o + 9:o + pad] = 0
                o += pad
            chunk_start = pos + pad
            out[o] = 6
            _store(out, o + 1, head_size - 9 + body, np.uint64)
            _store(out, o + 9, t0, np.uint64)
            _store(out, o + 17, t1, np.uint64)
            _store(out, o + 25, size, np.uint64)
            _store(out, o + 33, 0, np.uint32)       # no CRC
            _store(out, o + 37, len(compression), np.uint32)
            for i in range(len(compression)):
                out[o + 41 + i] = compression[i]
            _store(out, o + 41 + len(compression), body, np.uint64)
            o += head_size
            layout[p, 3] = o
            chunk_end = chunk_start + head_size + body
            records = o
            used = 0
            for i in range(r0, r1):
                cid = index[i, 0]
                seen = False
                for k in range(used):
                    if channels[k, 0] == cid:
                        seen = True
                        break
                if seen:
                    continue
                count = 0
                for j in range(i, r1):
                    if index[j, 0] == cid:
                        count += 1
                channels[used, 0], channels[used, 1] = cid, o - records    # (its MessageIndex record's offset)
                used += 1
                out[o] = 7                       # MessageIndex: opcode, length, channel, (time, offset)s
                _store(out, o + 1, 2 + 4 + 16 * count, np.uint64)
                _store(out, o + 9, cid, np.uint16)
                _store(out, o + 11, 16 * count, np.uint32)
                o += 15
                for j in range(i, r1):
                    if index[j, 0] == cid:
                        _store(out, o, index[j, 1], np.uint64)
                        _store(out, o + 8, index[j, 2] - offset, np.uint64)
                        o += 16
            index_size = o - records
            layout[p, 4] = o
            _store(out, o, t0, np.uint64)
            _store(out, o + 8, t1, np.uint64)
            _store(out, o + 16, chunk_start, np.uint64)
            _store(out, o + 24, chunk_end - chunk_start, np.uint64)
            _store(out, o + 32, 10 * used, np.uint32)
            o += 36
            for k in range(used):
                _store(out, o, channels[k, 0], np.uint16)
                _store(out, o + 2, chunk_end + channels[k, 1], np.uint64)
                o += 10
            _store(out, o, index_size, np.uint64)
            _store(out, o + 8, len(compression), np.uint32)
            for i in range(len(compression)):
                out[o + 12 + i] = compression[i]
            o += 12 + len(compression)
            _store(out, o, body, np.uint64)
            _store(out, o + 8, size, np.uint64)
            o += 16
            layout[p, 5] = o
            pos = chunk_end + index_size
            r0 = r1
        return pieces, found, pos

    @kernel()
    def record_lane(buf, state, index, consts, table, gathers, stamps, progress, q, v, tau, kin, tf,
                     sample_count, sample_stamp, period, k, t, mask, hold, m, limit):
        """Lane.record's compiled part, from member m on: each due member's template bytes with
        its stamps and values written in, as an MCAP Message record (_MESSAGE_RECORD) after the
        chunk's lane records in buf, and its index entry. mask < 0: the step's due mask is
        computed first (templates.due_rates(period, k, t), which moves k on: once a step).
        Returns (the next member, the mask, why it stopped): DONE after the last member;
        OVER_LIMIT after a record that took the chunk past `limit` bytes (the caller writes the
        chunk, then calls again from the member returned); INDEX_FULL at a member whose entry
        does not fit the index; _PREPARE at a due member whose bit is in `hold` (the caller
        computes the values it gathers, then calls again with hold 0)."""
        if mask < 0:
            mask = due_rates(period, k, t)
        for m in range(m, len(table)):
            slot = table[m, 3]
            if slot < 0:
                if (mask >> table[m, 4]) & 1 == 0:
                    continue
                if (hold >> table[m, 4]) & 1:
                    return m, mask, _PREPARE
                stamp = t
            else:
                if sample_count[slot] == progress[m, 0]:
                    continue
                stamp = sample_stamp[slot]
            count = state[3]
            if count == len(index):
                return m, mask, INDEX_FULL
            # seconds and nanoseconds as messages.to_sec_nanosec rounds them (half to even)
            sec = np.floor(stamp)
            nanosec = np.rint((stamp - sec) * 1e9)
            if nanosec >= 1e9:
                sec += 1.0
                nanosec = 0.0
            isec, insec = np.int64(sec), np.int64(nanosec)
            ns = isec * 1_000_000_000 + insec
            n = table[m, 2]
            at = state[4]
            size = state[0]
            buf[at] = 5
            _store(buf, at + 1, 22 + n, np.uint64)
            _store(buf, at + 9, table[m, 0], np.uint16)
            _store(buf, at + 11, 0, np.uint32)
            _store(buf, at + 15, ns, np.uint64)
            _store(buf, at + 23, ns, np.uint64)
            body = at + 31
            c = table[m, 1]
            _copy_bytes(buf, body, consts, c, n)
            for s in range(table[m, 7], table[m, 8]):
                _store(buf, body + stamps[s], isec, np.int32)
                _store(buf, body + stamps[s] + 4, insec, np.uint32)
            for g in range(table[m, 5], table[m, 6]):
                src, i = gathers[g, 1], gathers[g, 2]
                if src == 0:
                    x = q[i]
                elif src == 1:
                    x = v[i]
                elif src == 2:
                    x = tau[i]
                elif src == 3:
                    x = kin[i]
                else:
                    x = tf[i]
                _store(buf, body + gathers[g, 0], x, np.float64)
            index[count, 0] = table[m, 0]
            index[count, 1] = ns
            index[count, 2] = size
            state[3] = count + 1
            if state[5] < 0:
                state[5] = at
            state[4] = body + n
            state[0] = size + 31 + n
            if ns < state[1]:
                state[1] = ns
            if ns > state[2]:
                state[2] = ns
            if slot >= 0:
                progress[m, 0] = sample_count[slot]
            progress[m, 1] += 1
            if state[0] > limit:
                return m + 1, mask, OVER_LIMIT
        return len(table), mask, DONE
