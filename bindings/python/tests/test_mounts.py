"""Mount points and exclude from Python (issue 32 item 3): a dict spec with `mount` and
`exclude` builds the same bytes as the CLI does for the same spec as TOML, and a bad mount
point is a SpecError naming the key."""

import os
import pathlib
import subprocess
from typing import Any

import pytest

import blockwise


def tree(root: pathlib.Path) -> None:
    (root / "boot/firmware/overlays").mkdir(parents=True)
    (root / "boot/firmware/config.txt").write_text("dtparam=audio=on\n")
    (root / "boot/firmware/overlays/x.dtbo").write_bytes(b"dtbo")
    (root / "etc").mkdir()
    (root / "etc/hostname").write_text("pi\n")
    (root / "var/cache").mkdir(parents=True)
    (root / "var/cache/big.deb").write_bytes(b"d" * 10000)


SPEC: dict[str, Any] = {
    "image": {"size": "192MiB", "table": "mbr", "seed": 3, "timestamp": 1700000000},
    "partition": [
        {"fs": "fat32", "size": "64MiB", "label": "bootfs", "mount": "/boot/firmware"},
        {
            "fs": "ext4",
            "size": "fill",
            "label": "rootfs",
            "contents": "rootfs/",
            "exclude": ["var/cache/*.deb"],
        },
    ],
}

TOML = """[image]
size = "192MiB"
table = "mbr"
seed = 3
timestamp = 1700000000
[[partition]]
fs = "fat32"
size = "64MiB"
label = "bootfs"
mount = "/boot/firmware"
[[partition]]
fs = "ext4"
size = "fill"
label = "rootfs"
contents = "rootfs/"
exclude = ["var/cache/*.deb"]
"""


def test_mounts_and_exclude_build_as_the_cli_does(tmp_path: pathlib.Path) -> None:
    tree(tmp_path / "rootfs")
    out = tmp_path / "py.img"
    built = blockwise.build(SPEC, out, base_dir=tmp_path)
    assert [p["filesystem"]["kind"] for p in built["partitions"]] == ["fat32", "ext4"]
    cli = os.environ.get("BLOCKWISE_CLI")
    if not cli or not pathlib.Path(cli).exists():
        pytest.skip("no CLI to compare with")
    (tmp_path / "s.toml").write_text(TOML)
    subprocess.run([cli, "build", str(tmp_path / "s.toml"), "-o", str(tmp_path / "cli.img"), "-q"], check=True)
    assert out.read_bytes() == (tmp_path / "cli.img").read_bytes()


def test_a_missing_mount_point_is_a_spec_error(tmp_path: pathlib.Path) -> None:
    tree(tmp_path / "rootfs")
    spec = dict(SPEC)
    spec["partition"] = [dict(SPEC["partition"][0], mount="/boot/efi"), SPEC["partition"][1]]
    with pytest.raises(blockwise.SpecError) as e:
        blockwise.build(spec, tmp_path / "x.img", base_dir=tmp_path)
    assert e.value.key == "partition[1].mount"
    assert not (tmp_path / "x.img").exists()
