"""Issue 31: every exception is a blockwise.Error and the builtin a caller would catch; OS
errors are the builtin subclass of their errno with the caller's path (never a temp file);
messages are in Python's words."""

from __future__ import annotations

import errno
import os
import pathlib
import re
import shutil
import subprocess
import tempfile
from typing import Any

import pytest

import blockwise
from conftest import need_root_losetup, need_tool

SMALL: dict[str, Any] = {
    "image": {"size": "64MiB", "seed": 7, "timestamp": 1700000000},
    "partition": [{"fs": "fat32", "size": "fill", "label": "SMALL"}],
}

# What must never reach a Python user: Rust's error suffix and type names, serde's words, a
# temp file's name, the command line's flags.
LEAKS = re.compile(
    r"os error \d|unit value|as u128|as i128|u64|i64|u32|PyString|Sequence'|Mapping'|"
    r"floating point|\.tmp-|--partition-ok|--direct|--yes\b|--zero-holes"
)


def clean(message: str) -> str:
    assert not LEAKS.search(message), message
    return message


@pytest.mark.parametrize(
    ("cls", "builtin"),
    [
        (blockwise.SpecError, ValueError),
        (blockwise.UnsafeTargetError, PermissionError),
        (blockwise.CorruptImageError, ValueError),
        (blockwise.UnsupportedError, NotImplementedError),
        (blockwise.CancelledError, Exception),
    ],
)
def test_classes(cls: type[Exception], builtin: type[Exception]) -> None:
    assert issubclass(cls, blockwise.Error) and issubclass(cls, builtin)
    assert cls.__module__ == "blockwise._errors"
    assert cls.__doc__ and len(cls.__doc__) > 40
    assert issubclass(blockwise.BlockwiseWarning, UserWarning)
    assert issubclass(blockwise.UnsafeTargetError, OSError)


def test_spec_error(tmp_path: pathlib.Path) -> None:
    with pytest.raises(blockwise.Error) as e:
        blockwise.plan({"image": {"size": "1GiB", "erase-block": "3MiB"}})
    assert isinstance(e.value, blockwise.SpecError) and isinstance(e.value, ValueError)
    assert e.value.key == "image.erase-block"
    assert clean(str(e.value)).startswith("image.erase-block")


@pytest.mark.parametrize(
    ("spec", "key", "words"),
    [
        ({"image": {"size": None}}, "image.size", "None"),
        ({"image": {"size": "1GiB", "seed": 2**70}}, "image.seed", f"int {2**70}"),
        ({"image": {"size": 2**80}}, "image.size", f"int {2**80}"),
        ({"image": {"size": "1GiB", "timestamp": 1.5}}, "image.timestamp", "float 1.5"),
        ({"image": {"size": "1GiB"}, "partition": {"fs": "fat32"}}, "partition", "dict, expected a list"),
        (
            {"image": {"size": "1GiB"}, "partition": [{"fs": 3, "size": "fill"}]},
            "partition[1].fs",
            "int, expected a str",
        ),
        (
            {"image": {"size": "1GiB"}, "partition": [{"fs": "fat32", "size": "fill", "fat": []}]},
            "partition[1].fat",
            "list, expected a dict",
        ),
    ],
)
def test_dict_spec_errors_in_python_words(spec: Any, key: str, words: str) -> None:
    with pytest.raises(blockwise.SpecError) as e:
        blockwise.plan(spec)
    assert e.value.key == key
    assert words in clean(str(e.value)), str(e.value)


def test_output_is_a_directory(tmp_path: pathlib.Path) -> None:
    with pytest.raises(IsADirectoryError) as e:
        blockwise.build(SMALL, tmp_path)
    assert e.value.errno == errno.EISDIR
    assert e.value.filename == str(tmp_path)
    assert e.value.strerror is not None and "directory" in e.value.strerror
    text = clean(str(e.value))
    assert str(tmp_path) in text and "None" not in text, text


def test_missing_files(tmp_path: pathlib.Path) -> None:
    for call in (
        lambda: blockwise.plan(tmp_path / "missing.toml"),
        lambda: blockwise.plan(str(tmp_path / "missing.toml")),
        lambda: blockwise.verify(tmp_path / "missing.toml"),
        lambda: blockwise.write(tmp_path / "missing.toml", tmp_path / "out.img"),
    ):
        with pytest.raises(FileNotFoundError) as e:
            call()
        assert e.value.errno == errno.ENOENT
        assert e.value.filename == str(tmp_path / "missing.toml")
        assert str(tmp_path / "missing.toml") in clean(str(e.value))
    assert not (tmp_path / "out.img").exists()


def test_unreadable_contents_names_the_file(
    tmp_path: pathlib.Path, request: pytest.FixtureRequest
) -> None:
    if os.geteuid() == 0 and shutil.which("setpriv") is None:
        pytest.skip("root reads everything and setpriv is missing")
    if os.geteuid() == 0:
        # pytest's directory is root's alone (0700): work where nobody can reach.
        tmp_path = pathlib.Path(tempfile.mkdtemp(prefix="blockwise-r31-"))
        request.addfinalizer(lambda: shutil.rmtree(tmp_path))
    (tmp_path / "c").mkdir()
    secret = tmp_path / "c" / "secret"
    secret.write_text("x")
    secret.chmod(0)
    spec = {"image": {"size": "64MiB", "table": "none"},
            "partition": [{"fs": "fat32", "size": "fill", "contents": str(tmp_path / "c")}]}
    if os.geteuid() == 0:
        # As nobody, through a child: root would read the file anyway.
        tmp_path.chmod(0o755)
        (tmp_path / "c").chmod(0o755)
        (tmp_path / "out").mkdir(mode=0o777)
        (tmp_path / "out").chmod(0o777)
        never = tmp_path / "out" / "never.img"
        code = (
            "import blockwise, sys\n"
            f"try: blockwise.build({spec!r}, {str(never)!r})\n"
            "except PermissionError as e: print(e.errno, e.filename, '|', e); sys.exit(0)\n"
            "sys.exit(1)\n"
        )
        import sys

        r = subprocess.run(
            ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", sys.executable, "-c", code],
            capture_output=True, text=True, env={**os.environ, "HOME": "/"},
        )
        assert r.returncode == 0, r.stdout + r.stderr
        assert not any((tmp_path / "out").iterdir())
        assert r.stdout.startswith(f"{errno.EACCES} {secret} |"), r.stdout
        clean(r.stdout)
        return
    with pytest.raises(PermissionError) as e:
        blockwise.build(spec, tmp_path / "o.img")
    assert e.value.filename == str(secret)


def test_unsafe_target_is_a_permission_error(tmp_path: pathlib.Path) -> None:
    img = tmp_path / "a.img"
    blockwise.build(SMALL, img)
    with pytest.raises(PermissionError) as e:
        blockwise.write(img, img)
    assert isinstance(e.value, blockwise.UnsafeTargetError)
    assert e.value.errno == errno.EPERM and e.value.filename == str(img)
    text = clean(str(e.value))
    assert text.startswith(str(img)) and "input" in text and "[Errno" not in text
    assert e.value.strerror is not None and "input" in e.value.strerror
    # build: an output that is an input.
    spec = tmp_path / "s.toml"
    spec.write_text('[image]\nsize = "64MiB"\n[[partition]]\nfs = "fat32"\nsize = "fill"\n')
    with pytest.raises(blockwise.UnsafeTargetError) as e2:
        blockwise.build(spec, spec)
    assert e2.value.filename == str(spec) and str(spec) in str(e2.value)


def test_partition_target_message_names_the_keyword(tmp_path: pathlib.Path) -> None:
    need_root_losetup()
    from conftest import loop

    backing = tmp_path / "disk.img"
    blockwise.build(
        {"image": {"size": "32MiB", "erase-block": "1MiB"},
         "partition": [{"fs": "fat", "size": "fill"}]},
        backing,
    )
    img = tmp_path / "small.img"
    with open(img, "wb") as f:
        f.truncate(1 << 20)
    with loop(backing) as dev:
        part = dev + "p1"
        # The kernel may not scan a loop device's table itself: partx adds the partitions.
        subprocess.run([need_tool("partx"), "-a", dev], capture_output=True)
        try:
            assert os.path.exists(part), f"partx -a {dev} made no {part}"
            with pytest.raises(blockwise.UnsafeTargetError) as e:
                blockwise.write(img, part, yes=True, raw=True)
        finally:
            subprocess.run([need_tool("partx"), "-d", dev], capture_output=True)
    assert "partition_ok=True" in clean(str(e.value)), str(e.value)


def test_corrupt_image_is_a_value_error(tmp_path: pathlib.Path) -> None:
    junk = tmp_path / "junk.img"
    junk.write_bytes(b"\x01" * 65536)
    with pytest.raises(ValueError) as e:
        blockwise.verify(junk)
    assert isinstance(e.value, blockwise.CorruptImageError)
    assert e.value.filename == str(junk)
    assert str(junk) in clean(str(e.value))


def test_unsupported_is_not_implemented() -> None:
    spec = {
        "image": {"size": "64MiB"},
        "partition": [{"fs": "ext4", "size": "fill", "ext4": {"features": ["bigalloc"]}}],
    }
    with pytest.raises(NotImplementedError) as e:
        blockwise.plan(spec)
    assert isinstance(e.value, blockwise.UnsupportedError)
    assert "partition[1]" in clean(str(e.value))


def test_a_full_disk_names_the_output_not_the_temp_file(tmp_path: pathlib.Path) -> None:
    """ENOSPC on a 1 MiB tmpfs (root): the error is ENOSPC, names out.img, and nothing is
    left in the directory."""
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root")
    small = tmp_path / "small"
    small.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(small)])
    if r.returncode != 0:
        pytest.skip("cannot mount a tmpfs here")
    try:
        (tmp_path / "c").mkdir()
        (tmp_path / "c" / "big").write_bytes(os.urandom(4 << 20))
        spec = {"image": {"size": "64MiB", "table": "none"},
                "partition": [{"fs": "fat32", "size": "fill", "contents": str(tmp_path / "c")}]}
        out = small / "out.img"
        with pytest.raises(OSError) as e:
            blockwise.build(spec, out, small / "out.bmap")
        assert e.value.errno == errno.ENOSPC, e.value
        assert e.value.filename == str(out), e.value
        assert not isinstance(e.value, blockwise.Error)
        clean(str(e.value))
        assert os.listdir(small) == []
    finally:
        subprocess.run(["umount", str(small)])


def test_cli_flags_are_keyword_arguments_in_messages(tmp_path: pathlib.Path) -> None:
    # A note of write: holes keep their old contents unless zero_holes=True.
    spec = {"image": {"size": "64MiB"}, "partition": [{"fs": "fat32", "size": "fill"}]}
    img = tmp_path / "a.img"
    blockwise.build(spec, img)
    target = tmp_path / "t.img"
    target.write_bytes(b"\xff" * (1 << 20))
    r = blockwise.write(img, target, verify=False)
    for n in r["notes"] + r["warnings"]:
        clean(n)


def test_build_warnings_are_blockwise_warnings_and_listed(tmp_path: pathlib.Path) -> None:
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "f").write_text("x\n")
    spec = {
        "image": {"size": "256MiB"},
        "partition": [{"fs": "exfat", "size": "fill", "contents": str(tmp_path / "c"),
                       "entry": [{"path": "/f", "uid": 5}]}],
    }
    with pytest.warns(blockwise.BlockwiseWarning, match="exFAT stores no owners") as record:
        r = blockwise.build(spec, tmp_path / "o.img")
    issued = [str(w.message) for w in record if issubclass(w.category, blockwise.BlockwiseWarning)]
    assert issued == r["warnings"] and len(issued) == 1
    clean(issued[0])
