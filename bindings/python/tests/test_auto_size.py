"""size = "auto" from Python (issue 32 item 2): a dict spec with "auto" and
"auto+N%+SIZE" sizes plans and builds what the CLI does for the same spec as TOML, the
explanation is in the partition's notes, and bad grammar is a SpecError naming the key."""

import os
import pathlib
import subprocess
from typing import Any

import pytest

import blockwise


def tree(root: pathlib.Path) -> None:
    (root / "sub").mkdir(parents=True)
    (root / "big.bin").write_bytes(bytes(range(256)) * 4000)
    for i in range(60):
        (root / "sub" / f"a long file name {i}.txt").write_text(f"file {i}\n")


SPEC: dict[str, Any] = {
    "image": {"erase-block": "1MiB", "table": "mbr", "seed": 3, "timestamp": 1700000000},
    "partition": [
        {"fs": "fat16", "size": "auto+10%", "label": "BOOT", "contents": "t/"},
        {"fs": "ext4", "size": "auto+1MiB", "label": "root", "contents": "t/"},
    ],
}

TOML = """[image]
erase-block = "1MiB"
table = "mbr"
seed = 3
timestamp = 1700000000
[[partition]]
fs = "fat16"
size = "auto+10%"
label = "BOOT"
contents = "t/"
[[partition]]
fs = "ext4"
size = "auto+1MiB"
label = "root"
contents = "t/"
"""


def test_auto_sizes_plan_and_build_as_the_cli_does(tmp_path: pathlib.Path) -> None:
    tree(tmp_path / "t")
    plan = blockwise.plan(SPEC, base_dir=tmp_path)
    sizes = [p["size_bytes"] for p in plan["partitions"]]
    assert all(s % (1 << 20) == 0 and s > 0 for s in sizes)
    for p in plan["partitions"]:
        assert p["filesystem"]["notes"][0].startswith('size = "auto+')
    out = tmp_path / "py.img"
    built = blockwise.build(SPEC, out, base_dir=tmp_path)
    assert [p["size_bytes"] for p in built["partitions"]] == sizes
    cli = os.environ.get("BLOCKWISE_CLI")
    if not cli or not pathlib.Path(cli).exists():
        pytest.skip("no CLI to compare with")
    (tmp_path / "s.toml").write_text(TOML)
    subprocess.run([cli, "build", str(tmp_path / "s.toml"), "-o", str(tmp_path / "cli.img"), "-q"], check=True)
    assert out.read_bytes() == (tmp_path / "cli.img").read_bytes()


def test_bad_auto_grammar_is_a_spec_error_naming_the_key(tmp_path: pathlib.Path) -> None:
    spec = {"partition": [{"fs": "ext4", "size": "auto+lots"}]}
    with pytest.raises(blockwise.SpecError) as e:
        blockwise.plan(spec, base_dir=tmp_path)
    assert e.value.key == "partition[1].size"
    assert "neither a percentage" in str(e.value)
