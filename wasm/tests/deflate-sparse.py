#!/usr/bin/env python3
"""Writes a sparse raw image as `.img.gz` and as a deflated `.zip` in seconds, whatever its size.

    deflate-sparse.py IMAGE OUT.img.gz OUT.zip

The image is cut into 64 MiB pieces, and those holding data into 1 MiB pieces. A piece that
holds no data (no extent of the sparse file, found with SEEK_DATA/SEEK_HOLE) is all zeros:
it is compressed once and its bytes repeated. Pieces with data are compressed as they are. Both files hold one raw deflate stream made
of the pieces, each ending in a sync flush (non-final blocks, byte-aligned, no reference
before its own start), then a final empty block: the gzip file as one member (as `gzip`
writes it), the zip as one deflated entry named as IMAGE, with Zip64 sizes. The CRC-32 is
extended over zero pieces with a precomputed linear map instead of reading the zeros. Used by wasm/tests/e2e.mjs for the 32 GiB fixtures (`xz`/`zstd` come from
`blockwise build` directly).
"""
import os
import struct
import sys
import zlib

PIECE = 64 << 20
SUB = 1 << 20


def data_ranges(fd, size):
    """The [start, end) ranges of the sparse file that hold data."""
    out, off = [], 0
    while off < size:
        try:
            start = os.lseek(fd, off, os.SEEK_DATA)
        except OSError:
            break
        end = os.lseek(fd, start, os.SEEK_HOLE)
        out.append((start, end))
        off = end
    return out


def zero_extender(n):
    """f(crc) = zlib.crc32(bytes(n), crc), as the GF(2)-affine map it is: f(0) and f(1 << i)."""
    zeros = bytes(n)
    base = zlib.crc32(zeros, 0)
    cols = [zlib.crc32(zeros, 1 << i) ^ base for i in range(32)]

    def extend(crc):
        out = base
        for i in range(32):
            if crc >> i & 1:
                out ^= cols[i]
        return out

    return extend


def main():
    image, gz_path, zip_path = sys.argv[1:4]
    fd = os.open(image, os.O_RDONLY)
    size = os.fstat(fd).st_size
    ranges = data_ranges(fd, size)
    pieces = (size + PIECE - 1) // PIECE

    def has_data(a, b):
        return any(s < b and e > a for s, e in ranges)

    raw_zero, ext_zero = {}, {}
    crc = 0
    name = os.path.basename(image).encode()
    with open(gz_path, 'wb') as gz, open(zip_path, 'wb') as z:
        # gzip header: deflate, no name, mtime 0, OS unknown.
        gz.write(b'\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff')
        # Local header with Zip64 sizes to be patched (crc, sizes at the end).
        local_extra = struct.pack('<HHQQ', 1, 16, 0, 0)
        z.write(struct.pack('<IHHHHHIIIHH', 0x04034B50, 45, 0, 8, 0, 0x21, 0, 0xFFFFFFFF, 0xFFFFFFFF, len(name), len(local_extra)))
        z.write(name)
        extra_at = z.tell() + 4
        z.write(local_extra)
        data_at = z.tell()

        def zero(n):
            nonlocal crc
            if n not in raw_zero:
                buf = bytes(n)
                raw_zero[n] = deflate_piece(buf)
                ext_zero[n] = zero_extender(n)
            gz.write(raw_zero[n])
            z.write(raw_zero[n])
            crc = ext_zero[n](crc)

        # A piece with data is cut again into 1 MiB pieces, so only those are compressed.
        for i in range(pieces):
            a = i * PIECE
            n = min(PIECE, size - a)
            if not has_data(a, a + n):
                zero(n)
                continue
            for b in range(a, a + n, SUB):
                m = min(SUB, a + n - b)
                if not has_data(b, b + m):
                    zero(m)
                    continue
                buf = os.pread(fd, m, b)
                piece = deflate_piece(buf)
                gz.write(piece)
                z.write(piece)
                crc = zlib.crc32(buf, crc)
        z.write(b'\x03\x00')  # a final, empty fixed-Huffman block
        gz.write(b'\x03\x00' + struct.pack('<II', crc, size & 0xFFFFFFFF))
        comp = z.tell() - data_at
        cd_at = z.tell()
        cd_extra = struct.pack('<HHQQ', 1, 16, size, comp)
        z.write(struct.pack('<IHHHHHHIIIHHHHHII', 0x02014B50, 45, 45, 0, 8, 0, 0x21, crc, 0xFFFFFFFF, 0xFFFFFFFF,
                            len(name), len(cd_extra), 0, 0, 0, 0, 0))
        z.write(name)
        z.write(cd_extra)
        cd_len = z.tell() - cd_at
        eocd64_at = z.tell()
        z.write(struct.pack('<IQHHIIQQQQ', 0x06064B50, 44, 45, 45, 0, 0, 1, 1, cd_len, cd_at))
        z.write(struct.pack('<IIQI', 0x07064B50, 0, eocd64_at, 1))
        z.write(struct.pack('<IHHHHIIH', 0x06054B50, 0, 0, 1, 1, cd_len, cd_at, 0))
        z.seek(extra_at)
        z.write(struct.pack('<QQ', size, comp))
        z.seek(14)
        z.write(struct.pack('<I', crc))
    os.close(fd)


def deflate_piece(buf):
    """Raw deflate blocks of `buf`, none final, ending byte-aligned (a sync flush)."""
    c = zlib.compressobj(6, zlib.DEFLATED, -15)
    return c.compress(buf) + c.flush(zlib.Z_SYNC_FLUSH)


if __name__ == '__main__':
    main()
