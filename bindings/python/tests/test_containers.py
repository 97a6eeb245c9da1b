"""Containers: verify reads .zst/.gz/Android sparse like the raw image (plus `container`),
write decodes them, and formats blockwise refuses (or bytes that are no disk image) raise
UnsupportedError unless raw=True."""

from __future__ import annotations

import gzip
import os
import pathlib
import struct

import pytest

import blockwise

SMALL = {
    "image": {"size": "64MiB", "seed": 7, "timestamp": 1700000000},
    "partition": [{"fs": "fat32", "size": "fill", "label": "SMALL"}],
}


@pytest.fixture(scope="module")
def image(tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    out = tmp_path_factory.mktemp("img") / "small.img"
    blockwise.build(SMALL, out)
    return out


def sparse(raw: pathlib.Path, out: pathlib.Path) -> None:
    """An Android sparse image: RAW chunks for 4 KiB blocks with data, DONT_CARE for zeros."""
    data = raw.read_bytes()
    blocks = len(data) // 4096
    chunks: list[tuple[int, int, bytes]] = []
    for i in range(blocks):
        b = data[i * 4096 : (i + 1) * 4096]
        kind = 0xCAC3 if b.count(0) == 4096 else 0xCAC1
        if chunks and chunks[-1][0] == kind:
            t, n, p = chunks[-1]
            chunks[-1] = (t, n + 1, p + (b if kind == 0xCAC1 else b""))
        else:
            chunks.append((kind, 1, b if kind == 0xCAC1 else b""))
    with open(out, "wb") as f:
        f.write(struct.pack("<IHHHHIIII", 0xED26FF3A, 1, 0, 28, 12, 4096, blocks, len(chunks), 0))
        for t, n, p in chunks:
            f.write(struct.pack("<HHII", t, 0, n, 12 + len(p)) + p)


def without(report: dict[str, object], *keys: str) -> dict[str, object]:
    return {k: v for k, v in report.items() if k not in keys}


def test_verify_reads_containers_like_the_raw_image(image: pathlib.Path, tmp_path: pathlib.Path) -> None:
    raw = blockwise.verify(image)
    assert "container" not in raw
    gz = tmp_path / "small.img.gz"
    gz.write_bytes(gzip.compress(image.read_bytes(), 1))
    simg = tmp_path / "small.simg"
    sparse(image, simg)
    for path, kind, seekable in [(gz, "gzip", False), (simg, "android-sparse", True)]:
        r = blockwise.verify(path)
        c = r["container"]
        assert c["kind"] == kind and c["seekable"] is seekable, c
        assert without(r, "source", "container") == without(raw, "source")


def test_refused_formats_raise_unsupported(image: pathlib.Path, tmp_path: pathlib.Path) -> None:
    qcow = tmp_path / "disk.qcow2"
    qcow.write_bytes(b"QFI\xfb\x00\x00\x00\x03" + bytes(4096))
    with pytest.raises(blockwise.UnsupportedError, match="qcow2"):
        blockwise.verify(qcow)
    target = tmp_path / "out.img"
    with pytest.raises(blockwise.UnsupportedError, match="qemu-img convert"):
        blockwise.write(qcow, target, verify=False)
    assert not target.exists() or target.stat().st_size == 0


def test_write_decodes_and_raw_is_explicit(image: pathlib.Path, tmp_path: pathlib.Path) -> None:
    simg = tmp_path / "small.simg"
    sparse(image, simg)
    target = tmp_path / "out.img"
    r = blockwise.write(simg, target, verify=True)
    assert r["verified"] is True
    assert target.read_bytes()[: image.stat().st_size] == image.read_bytes()
    blob = tmp_path / "firmware.bin"
    blob.write_bytes(os.urandom(1 << 20))
    with pytest.raises(blockwise.UnsupportedError, match="not a disk image") as e:
        blockwise.write(blob, tmp_path / "fw.img", verify=False)
    # The hint in Python's words.
    assert "pass raw=True" in str(e.value) and "--raw" not in str(e.value), e.value
    r = blockwise.write(blob, tmp_path / "fw.img", verify=True, raw=True)
    assert r["verified"] is True
    assert (tmp_path / "fw.img").read_bytes() == blob.read_bytes()
