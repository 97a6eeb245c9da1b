#!/usr/bin/env python3
"""blockwise against its peers, on one machine, in one go (issue 14).

Run it through benches/compare.sh (which only calls this file); `--help` lists the flags.
Standard library only. What it does:

1. builds blockwise in release (`cargo build --release`; `--debug` for the dev profile);
2. as root, installs the missing peers with apt-get (one `apt-get update` first);
3. generates deterministic trees under the work dir (default target/compare, never tmpfs):
   T1 5,000 files / ~150 MB nested and T2 20,000 small files in one directory (the shapes
   of crates/test-kit/src/bench.rs), T3 100,000 files nested (~1 GB), T4 42 x 100 MiB
   (4.1 GiB), M1 1,000,000 empty files (1,000 directories of 1,000), and a Raspberry Pi
   OS-like boot tree; S16 builds T1 into a sparse 16 TiB ext4 (less one erase block: the
   largest file ext4 holds);
4. times every row (median, min and max of --runs runs, rows of a case interleaved so they
   see the same machine state, in the reverse order every other run) under
   `/usr/bin/time -v` for the peak RSS;
5. `--only encode` (issue 27): `build -o .simg/.img.zst/.img.xz` vs `build -o .img` then
   img2simg / `zstd -T0` / `xz -T0`, for the RPi image from T1 at its size and grown to
   8 GiB, and writing it as .img and as .simg onto a loop device;
6. prints the rows with the ratios and the goals of issues 14, 27 and 34, and writes a
   Markdown table (benches/results.md, and docs/performance.md between <!-- compare:begin -->
   and <!-- compare:end -->).

Like with like: `blockwise build` writes a temp file, fsyncs it and renames it, so every
peer's output is made durable the same way, with `sync FILE` (fsync) timed as its last step.
The floor is `tar -cf - DIR | cat > FILE` + fsync: read every file, write it once (GNU tar
does not read file contents when the archive is /dev/null, so the archive goes through a
pipe). `blockwise write`, `dd conv=fsync` and `bmaptool copy` all sync the device before
they exit; one write row has the image's `.bmap` beside it, as users have it (blockwise then
checks every range's SHA-256 as it writes). The page cache is warm for every row (the trees
are read from memory after the first run).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import random
import shutil
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional

REPO = Path(__file__).resolve().parent.parent
KIB = 1024
MIB = 1024 * KIB
GIB = 1024 * MIB
TIMESTAMP = 1_700_000_000
BEGIN = "<!-- compare:begin -->"
END = "<!-- compare:end -->"
GROUPS = ["T1", "T2", "T3", "T4", "M1", "S16", "rpi", "verify", "write", "encode", "rofs"]
MTOOLS_ENV = {"MTOOLS_SKIP_CHECK": "1", "LC_ALL": "C.UTF-8"}
# The peers: command -> Debian package.
PEERS = {
    "genimage": "genimage",
    "mkfs.fat": "dosfstools",
    "fsck.fat": "dosfstools",
    "mcopy": "mtools",
    "mke2fs": "e2fsprogs",
    "dumpe2fs": "e2fsprogs",
    "e2fsck": "e2fsprogs",
    "sfdisk": "fdisk",
    "bmaptool": "bmap-tools",
    "/usr/bin/time": "time",
    "losetup": "mount",
    "tar": "tar",
    "mksquashfs": "squashfs-tools",
    "mkfs.erofs": "erofs-utils",
    "veritysetup": "cryptsetup-bin",
    "mkfs.exfat": "exfatprogs",
    "mount.exfat-fuse": "exfat-fuse",
    "img2simg": "android-sdk-libsparse-utils",
    "simg2img": "android-sdk-libsparse-utils",
    "zstd": "zstd",
    "xz": "xz-utils",
}


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def have(cmd: str) -> bool:
    return shutil.which(cmd) is not None or (cmd.startswith("/") and os.access(cmd, os.X_OK))


def is_root() -> bool:
    return os.geteuid() == 0


# ---------------------------------------------------------------------------------------
# Trees


@dataclass
class Shape:
    """A deterministic tree: `kind` nested | flat | big | boot and its parameters."""

    name: str
    kind: str
    dirs: int = 0  # nested: directories (each with a "Sub Dir"); empty: directories
    modulus: int = 0  # nested: file k has 1000 + (k * 7919) % modulus bytes
    count: int = 0  # flat: files; big: files; empty: files per directory
    big_bytes: int = 0  # big: bytes per file
    image_bytes: int = 0  # the bare filesystem images made from it

    def stamp(self) -> str:
        return json.dumps(self.__dict__, sort_keys=True)


def shapes(quick: bool) -> dict[str, Shape]:
    if quick:
        return {
            "T1": Shape("T1", "nested", dirs=5, modulus=59_000, image_bytes=256 * MIB),
            "T2": Shape("T2", "flat", count=2_000, image_bytes=256 * MIB),
            "T3": Shape("T3", "nested", dirs=20, modulus=19_000, image_bytes=256 * MIB),
            "T4": Shape("T4", "big", count=3, big_bytes=16 * MIB, image_bytes=256 * MIB),
            "M1": Shape("M1", "empty", dirs=10, count=1_000, image_bytes=256 * MIB),
            "boot": Shape("boot", "boot", count=20),
            "R1": Shape("R1", "text", dirs=5, modulus=59_000),
        }
    return {
        # bench.rs `nested`: 50 directories x 100 files, 1000 + (n * 7919) % 59000 bytes.
        "T1": Shape("T1", "nested", dirs=50, modulus=59_000, image_bytes=1 * GIB),
        # bench.rs `flat` with 8.3-sized names (mcopy needs no numeric tails then).
        "T2": Shape("T2", "flat", count=20_000, image_bytes=1 * GIB),
        # The nested shape with 1000 directories and ~10 KB files: 100,000 files, ~1 GB.
        "T3": Shape("T3", "nested", dirs=1_000, modulus=19_000, image_bytes=2 * GIB),
        # 42 x 100 MiB = 4.1 GiB: large files, each below FAT32's 4 GiB limit.
        "T4": Shape("T4", "big", count=42, big_bytes=100 * MIB, image_bytes=5 * GIB),
        # 1,000,000 empty files in 1,000 directories (FAT32 directories hold at most 65,536
        # entries): the cost per file alone, and memory per file.
        "M1": Shape("M1", "empty", dirs=1_000, count=1_000, image_bytes=4 * GIB),
        "boot": Shape("boot", "boot", count=300),
        # T1's shape with text content (compressible, like a root filesystem's).
        "R1": Shape("R1", "text", dirs=50, modulus=59_000),
    }


def with_bmap(img: Path, bmap: Path) -> tuple[Path, Path]:
    """`img`'s .bmap at `bmap` (made once), and the same image (a hard link) with a copy of
    it beside, as users have it: blockwise finds it and checks every range's SHA-256 while it
    writes. Returns (bmap, the linked image)."""
    if not bmap.exists():
        quiet(["bmaptool", "-q", "create", str(img), "-o", str(bmap)])
    beside = img.with_name(img.stem + "-with-bmap" + img.suffix)
    if beside.exists():
        beside.unlink()
    os.link(img, beside)
    shutil.copyfile(bmap, beside.with_name(beside.name + ".bmap"))
    return bmap, beside


def attach_loop(c: dict, backing: Path, size: int) -> None:
    """A fresh sparse backing file of `size` bytes on a --direct-io loop device: c["dev"]."""
    backing.unlink(missing_ok=True)
    with open(backing, "wb") as f:
        f.truncate(size)
    c["dev"] = subprocess.run(
        ["losetup", "--direct-io=on", "-f", "--show", str(backing)],
        check=True, capture_output=True, text=True).stdout.strip()


def detach_loop(c: dict, backing: Path) -> None:
    if "dev" in c:
        subprocess.run(["losetup", "-d", c["dev"]], check=False)
    backing.unlink(missing_ok=True)


def write_random(path: Path, rng: random.Random, n: int) -> None:
    with open(path, "wb") as f:
        while n > 0:
            k = min(n, 8 * MIB)
            f.write(rng.randbytes(k))
            n -= k


def generate(shape: Shape, root: Path) -> None:
    """Creates the tree at `root` unless a complete one of the same shape is there."""
    stamp = root.with_name(root.name + ".complete")
    if stamp.exists() and stamp.read_text() == shape.stamp() and root.is_dir():
        return
    if root.exists():
        shutil.rmtree(root)
    stamp.unlink(missing_ok=True)
    log(f"generating {shape.name} in {root}")
    rng = random.Random(f"blockwise-compare-{shape.name}")
    root.mkdir(parents=True)
    if shape.kind == "text":
        words = [rng.randbytes(rng.randint(2, 9)).hex()[:rng.randint(2, 12)] for _ in range(4000)]
        n = 0
        for d in range(shape.dirs):
            top = root / f"directory {d:02} with a long name"
            sub = top / "Sub Dir"
            sub.mkdir(parents=True)
            for k in range(100):
                size = 1000 + (n * 7919) % shape.modulus
                text = []
                total = 0
                while total < size:
                    w = words[min(int(rng.paretovariate(1.2)) - 1, len(words) - 1)]
                    text.append(w)
                    total += len(w) + 1
                parent = top if k % 2 == 0 else sub
                (parent / f"File number {n} of the bench.txt").write_text(" ".join(text)[:size])
                n += 1
    elif shape.kind == "nested":
        n = 0
        for d in range(shape.dirs):
            top = root / f"directory {d:02} with a long name"
            sub = top / "Sub Dir"
            sub.mkdir(parents=True)
            for k in range(100):
                size = 1000 + (n * 7919) % shape.modulus
                parent = top if k % 2 == 0 else sub
                (parent / f"File number {n} of the bench.dat").write_bytes(rng.randbytes(size))
                n += 1
    elif shape.kind == "flat":
        many = root / "many"
        many.mkdir()
        for i in range(shape.count):
            (many / f"f{i:05}.txt").write_text(f"{i}\n")
    elif shape.kind == "empty":
        for d in range(shape.dirs):
            sub = root / f"d{d:03}"
            sub.mkdir()
            for k in range(shape.count):
                (sub / f"F{d * shape.count + k:07}").touch()
    elif shape.kind == "big":
        big = root / "big"
        big.mkdir()
        for i in range(shape.count):
            write_random(big / f"file{i:02}.bin", rng, shape.big_bytes)
    elif shape.kind == "boot":
        # Like a Raspberry Pi OS boot partition: firmware and kernels, device trees, overlays.
        quick = shape.count < 100
        scale = 8 if quick else 1
        for name, size in [
            ("bootcode.bin", 52_456), ("start.elf", 2_975_744), ("start4.elf", 2_250_976),
            ("fixup.dat", 7_314), ("fixup4.dat", 5_456), ("kernel8.img", 9_437_184),
            ("kernel_2712.img", 9_650_176), ("initramfs8", 11_534_336),
            ("initramfs_2712", 11_730_944),
        ]:
            write_random(root / name, rng, size // scale)
        (root / "config.txt").write_text("arm_64bit=1\ndtoverlay=vc4-kms-v3d\n")
        (root / "cmdline.txt").write_text("console=serial0,115200 root=LABEL=rootfs rootwait\n")
        for i in range(max(4, shape.count // 5)):
            write_random(root / f"bcm27{i:02}-rpi.dtb", rng, 20_000 + (i * 7919) % 40_000)
        ov = root / "overlays"
        ov.mkdir()
        for i in range(shape.count):
            write_random(ov / f"overlay-{i:03}.dtbo", rng, 1000 + (i * 7919) % 7_000)
    stamp.write_text(shape.stamp())


def tree_stats(root: Path) -> tuple[int, int]:
    files = 0
    total = 0
    for dirpath, _dirs, names in os.walk(root):
        for n in names:
            files += 1
            total += os.lstat(os.path.join(dirpath, n)).st_size
    return files, total


# ---------------------------------------------------------------------------------------
# Rows and timing


@dataclass
class Step:
    argv: list[str]
    env: Optional[dict[str, str]] = None
    stdin: Optional[bytes] = None
    ok: tuple[int, ...] = (0,)


@dataclass
class Row:
    tool: str  # what is shown in the table
    steps: Callable[[dict], list[Step]]
    setup: Optional[Callable[[dict], None]] = None  # untimed, before each run
    teardown: Optional[Callable[[dict], None]] = None  # untimed, after each run
    blockwise: bool = False  # the RSS budget applies
    floor: bool = False
    output: Optional[Path] = None  # an image whose size is reported (read before teardown)
    out_bytes: list[int] = field(default_factory=list)
    times: list[float] = field(default_factory=list)
    rss_kib: list[int] = field(default_factory=list)
    error: Optional[str] = None
    skipped: bool = False  # a tool is not installed: reported, not a failure


@dataclass
class Case:
    group: str
    name: str
    rows: list[Row]
    files: int = 0
    nbytes: int = 0
    note: str = ""


class StepFailed(Exception):
    pass


def run_row(row: Row, logdir: Path) -> None:
    ctx: dict = {}
    try:
        if row.setup:
            row.setup(ctx)
        total = 0.0
        peak = 0
        tlog = logdir / "time.log"
        steps = row.steps(ctx)
        missing = sorted({st.argv[0] for st in steps if not have(st.argv[0])})
        if missing:
            row.skipped = True
            raise StepFailed(f"skipped: {', '.join(missing)} not installed")
        for st in steps:
            env = dict(os.environ)
            if st.env:
                env.update(st.env)
            cmd = ["/usr/bin/time", "-v", "-o", str(tlog)] + st.argv
            t0 = time.perf_counter()
            p = subprocess.run(
                cmd, input=st.stdin, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env
            )
            total += time.perf_counter() - t0
            if p.returncode not in st.ok:
                raise StepFailed(
                    f"`{' '.join(st.argv)}` exited {p.returncode}: "
                    + (p.stderr or p.stdout).decode(errors="replace").strip()[-600:]
                )
            for line in tlog.read_text().splitlines():
                if "Maximum resident set size" in line:
                    peak = max(peak, int(line.rsplit(":", 1)[1]))
        row.times.append(total)
        row.rss_kib.append(peak)
        if row.output is not None and row.output.exists():
            row.out_bytes.append(row.output.stat().st_size)
    except StepFailed as e:
        row.error = str(e)
        log(f"    {'SKIPPED' if row.skipped else 'FAILED'} {row.tool}: {e}")
    finally:
        if row.teardown:
            try:
                row.teardown(ctx)
            except Exception as e:  # noqa: BLE001 - a failed cleanup is reported, not fatal
                log(f"    cleanup of {row.tool} failed: {e}")


def run_case(case: Case, runs: int, logdir: Path) -> None:
    log(f"== {case.name} ({runs} run{'s' if runs > 1 else ''})")
    for r in range(runs):
        # Every other run in the reverse order: no row always runs first (cold) or right
        # after another's writeback.
        order = case.rows if r % 2 == 0 else list(reversed(case.rows))
        for row in order:
            if row.error:
                continue
            run_row(row, logdir)
            if row.times and len(row.times) == r + 1:
                log(f"   run {r + 1}: {row.tool:<44} {row.times[-1]:8.3f} s"
                    f"  {row.rss_kib[-1] / 1024:7.1f} MiB")


def summary(row: Row) -> Optional[dict]:
    if row.error or not row.times:
        return None
    return {
        "median": statistics.median(row.times),
        "min": min(row.times),
        "max": max(row.times),
        "runs": len(row.times),
        "rss_mib": max(row.rss_kib) / 1024,
        **({"out_mib": max(row.out_bytes) / MIB} if row.out_bytes else {}),
    }


# ---------------------------------------------------------------------------------------
# Commands


def quiet(argv: list[str]) -> None:
    """An untimed helper command; its output is shown only when it fails."""
    p = subprocess.run(argv, capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError(f"`{' '.join(argv)}` exited {p.returncode}: {p.stderr.strip()}")


def sync(path: Path) -> Step:
    """fsync of one file, timed: what `blockwise build` does before its rename."""
    return Step(["sync", str(path)])


def floor_steps(tree: Path, out: Path) -> list[Step]:
    """The floor: every file read once and written once, made durable. GNU tar skips reading
    file contents when its archive is /dev/null, so the archive goes through a pipe."""
    return [Step(["sh", "-c", 'tar -cf - -C "$1" . | cat > "$2"', "floor", str(tree),
                  str(out)]), sync(out)]


def rm(*paths: Path) -> Callable[[dict], None]:
    def f(_ctx: dict) -> None:
        for p in paths:
            if p.is_dir():
                shutil.rmtree(p, ignore_errors=True)
            else:
                p.unlink(missing_ok=True)

    return f


def toml_str(p: Path) -> str:
    return json.dumps(str(p))  # a JSON string is a valid TOML basic string here


def bare_spec(path: Path, fs: str, tree: Path, size: int, backend: Optional[str] = None) -> Path:
    extra = f'\next4 = {{ backend = "{backend}" }}' if backend else ""
    path.write_text(
        f'[image]\nsize = "{size // MIB}MiB"\ntable = "none"\nseed = 1\ntimestamp = {TIMESTAMP}\n\n'
        f'[[partition]]\nfs = "{fs}"\nsize = "fill"\ncontents = {toml_str(tree)}\n'
        f'label = "BENCH"{extra}\n'
    )
    return path


def rpi_spec(path: Path, boot: Path, root: Path, boot_bytes: int, root_bytes: int) -> Path:
    path.write_text(
        f'[image]\nsize = "{(8 * MIB + boot_bytes + root_bytes) // MIB}MiB"\n'
        f'erase-block = "8MiB"\ntable = "mbr"\ndisk-id = "0x5452574f"\nseed = 1\n'
        f"timestamp = {TIMESTAMP}\n\n"
        f'[[partition]]\nfs = "fat32"\nsize = "{boot_bytes // MIB}MiB"\ncontents = {toml_str(boot)}\n'
        f'bootable = true\nlabel = "BOOTFS"\n\n'
        f'[[partition]]\nfs = "ext4"\nsize = "fill"\ncontents = {toml_str(root)}\n'
        f'label = "rootfs"\n'
    )
    return path


def mcopy_step(img: Path, tree: Path) -> Step:
    tops = sorted(str(p) for p in tree.iterdir())
    return Step(["mcopy", "-s", "-Q", "-i", str(img)] + tops + ["::/"], env=MTOOLS_ENV)


CLUSTERS: dict[int, int] = {}


def cluster_bytes(bw: str, size: int) -> int:
    """The cluster size blockwise picks for a FAT32 of `size` bytes (`plan --json`)."""
    if size not in CLUSTERS:
        out = subprocess.run([bw, "plan", "--size", f"{size // MIB}MiB", "--partition",
                              "fat32:fill", "--table", "none", "--json"], check=True,
                             capture_output=True, text=True).stdout
        CLUSTERS[size] = json.loads(out)["partitions"][0]["filesystem"]["cluster_bytes"]
    return CLUSTERS[size]


def mkfs_fat_step(bw: str, img: Path, size: int, label: str) -> Step:
    # The same cluster size as blockwise (mkfs.fat's own default may differ).
    spc = cluster_bytes(bw, size) // 512
    return Step(["mkfs.fat", "-F", "32", "-S", "512", "-s", str(spc), "-n", label, "-C",
                 str(img), str(size // KIB)])


def mke2fs_steps(img: Path, tree: Path, size: int, label: str,
                 inodes: Optional[int] = None) -> list[Step]:
    """mke2fs -d; `inodes` (-N) where its default ratio (one inode per 16 KiB) has too few
    for the tree, as for a million empty files in 4 GiB (blockwise counts the tree's)."""
    n = ["-N", str(inodes)] if inodes else []
    return [
        Step(["truncate", "-s", str(size), str(img)]),
        Step(["mke2fs", "-q", "-F", "-t", "ext4", "-L", label, *n, "-d", str(tree), str(img)],
             env={"E2FSPROGS_FAKE_TIME": str(TIMESTAMP)}),
    ]


# ---------------------------------------------------------------------------------------
# The groups


class Bench:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.work: Path = args.workdir
        self.bw = args.blockwise
        self.shapes = shapes(args.quick)
        # The RPi images' boot partition (512 MiB as Raspberry Pi OS; small in --quick).
        self.boot_bytes = 64 * MIB if args.quick else 512 * MIB
        self.trees: dict[str, Path] = {}
        self.stats: dict[str, tuple[int, int]] = {}
        self.loops: list[str] = []
        self.out = self.work / "out"
        self.specs = self.work / "specs"
        self.logs = self.work / "logs"
        for d in (self.out, self.specs, self.logs):
            d.mkdir(parents=True, exist_ok=True)

    def tree(self, name: str) -> Path:
        if name not in self.trees:
            p = self.work / "trees" / name
            generate(self.shapes[name], p)
            self.trees[name] = p
            self.stats[name] = tree_stats(p)
            f, b = self.stats[name]
            log(f"   {name}: {f} files, {b / 1e6:.1f} MB")
        return self.trees[name]

    # -- one tree into a bare filesystem image -----------------------------------------
    def tree_cases(self, name: str) -> list[Case]:
        tree = self.tree(name)
        files, nbytes = self.stats[name]
        size = self.shapes[name].image_bytes
        o = self.out
        ours_fat = o / f"{name}-blockwise.fat"
        peer_fat = o / f"{name}-mtools.fat"
        ours_ext = o / f"{name}-blockwise.ext4"
        ours_mk = o / f"{name}-blockwise-mke2fs.ext4"
        peer_ext = o / f"{name}-mke2fs.ext4"
        tar = o / f"{name}.tar"
        s_fat = bare_spec(self.specs / f"{name}-fat.toml", "fat32", tree, size)
        s_ext = bare_spec(self.specs / f"{name}-ext4.toml", "ext4", tree, size)
        s_mk = bare_spec(self.specs / f"{name}-ext4-mke2fs.toml", "ext4", tree, size, "mke2fs")
        tar_row = Row(TAR, lambda c: floor_steps(tree, tar), teardown=rm(tar), floor=True)
        gib = f"{size / GIB:g} GiB"
        fat = Case(name, f"{self.describe(name)} → {gib} FAT32", [
            Row("blockwise build", lambda c: [Step([self.bw, "build", str(s_fat), "-o",
                                                    str(ours_fat), "-q"])],
                teardown=rm(ours_fat), blockwise=True),
            Row("mkfs.fat -F 32 -C + mcopy -s", lambda c: [
                mkfs_fat_step(self.bw, peer_fat, size, "BENCH"), mcopy_step(peer_fat, tree),
                sync(peer_fat)], setup=rm(peer_fat), teardown=rm(peer_fat)),
            tar_row,
        ], files, nbytes)
        ext = Case(name, f"{self.describe(name)} → {gib} ext4", [
            Row("blockwise build", lambda c: [Step([self.bw, "build", str(s_ext), "-o",
                                                    str(ours_ext), "-q"])],
                teardown=rm(ours_ext), blockwise=True),
            Row(MKE2FS_BACKEND, lambda c: [
                Step([self.bw, "build", str(s_mk), "-o", str(ours_mk), "-q"])],
                teardown=rm(ours_mk), blockwise=True),
            Row("mke2fs -t ext4 -d", lambda c: mke2fs_steps(
                peer_ext, tree, size, "BENCH", inodes=files + 65_536 if name == "M1" else None)
                + [sync(peer_ext)], setup=rm(peer_ext), teardown=rm(peer_ext)),
            Row(TAR, tar_row.steps, teardown=rm(tar), floor=True),
        ], files, nbytes)
        if name == "M1":
            # mcopy takes minutes for a million files, and the mke2fs backend is mke2fs -d
            # plus a copy: mke2fs -d stays as the peer.
            fat.rows = [r for r in fat.rows if r.tool != MTOOLS]
            ext.rows = [r for r in ext.rows if r.tool != MKE2FS_BACKEND]
        cases = [fat, ext]
        if name in ("T1", "T2"):
            cases.append(self.exfat_case(name, s_fat, ours_fat, tar_row))
        return cases

    def sparse16_case(self) -> Case:
        """T1 into a sparse 16 TiB ext4 (less one erase block: an ext4 host holds files of
        at most 16 TiB - 4 KiB): the bitmaps and group descriptors of 131,072 groups,
        against mke2fs -d of the same tree and size."""
        tree = self.tree("T1")
        files, nbytes = self.stats["T1"]
        size = (256 * MIB) if self.args.quick else (16 * 1024 * GIB - 4 * MIB)
        o = self.out
        ours = o / "S16-blockwise.ext4"
        peer = o / "S16-mke2fs.ext4"
        tar = o / "S16.tar"
        spec = bare_spec(self.specs / "S16-ext4.toml", "ext4", tree, size)
        return Case("S16", f"{self.describe('T1')} → {size / (1024 * GIB):.2f} TiB sparse ext4"
                    if not self.args.quick else f"{self.describe('T1')} → 256 MiB ext4 (quick)", [
            Row(BWB, lambda c: [Step([self.bw, "build", str(spec), "-o", str(ours), "-q"])],
                teardown=rm(ours), blockwise=True),
            Row(MKE2FS, lambda c: mke2fs_steps(peer, tree, size, "BENCH") + [sync(peer)],
                setup=rm(peer), teardown=rm(peer)),
            # The image's own bytes: 131,072 inode bitmaps (512 MiB: the bits past a group's
            # 4,096 inodes are ones, so none is a hole), the descriptor table and its sparse_super
            # backups (8 MiB each): ~750 MiB of metadata tar's floor does not write.
            self.copy_image_row(spec, o / "S16-shape.ext4"),
            Row(TAR, lambda c: floor_steps(tree, tar), teardown=rm(tar), floor=True),
        ], files, nbytes)

    def exfat_case(self, name: str, s_fat: Path, ours_fat: Path, tar_row: Row) -> Case:
        """The tree into exFAT: blockwise, against mkfs.exfat + a copy through exfat-fuse
        (the only route of the peers: there is no mtools for exFAT) and against blockwise's
        own FAT32 of the same tree (issue 29)."""
        tree = self.tree(name)
        files, nbytes = self.stats[name]
        size = self.shapes[name].image_bytes
        o = self.out
        ours = o / f"{name}-blockwise.exfat"
        peer = o / f"{name}-mkfs.exfat"
        mnt = o / f"{name}-exfat-mnt"
        spec = bare_spec(self.specs / f"{name}-exfat.toml", "exfat", tree, size)
        # losetup, mount, cp, umount and detach in one timed shell step (the loop device's
        # name is only known at run time).
        copy = (f'set -e; dev=$(losetup -f --show {peer}); mkdir -p {mnt}; '
                f'mount.exfat-fuse "$dev" {mnt}; cp -r {tree}/. {mnt}/; '
                f'umount {mnt}; losetup -d "$dev"')
        gib = f"{size / GIB:g} GiB"
        return Case(name, f"{self.describe(name)} → {gib} exFAT", [
            Row("blockwise build", lambda c: [Step([self.bw, "build", str(spec), "-o",
                                                    str(ours), "-q"])],
                teardown=rm(ours), blockwise=True),
            Row("mkfs.exfat + exfat-fuse cp -r", lambda c: [
                Step(["truncate", "-s", str(size), str(peer)]),
                Step(["mkfs.exfat", "-L", "BENCH", str(peer)]),
                Step(["mount.exfat-fuse", "-h"], ok=(0, 1)),
                Step(["sh", "-c", copy]), sync(peer)],
                setup=rm(peer), teardown=rm(peer, mnt)),
            Row("blockwise build (FAT32, same tree)", lambda c: [
                Step([self.bw, "build", str(s_fat), "-o", str(ours_fat), "-q"])],
                teardown=rm(ours_fat), blockwise=True),
            # A small file fills a page of a cluster of its own (16 KiB for 1 GiB), so T2's
            # image is 20,000 separate 4 KiB extents.
            self.copy_image_row(spec, o / f"{name}-shape.exfat"),
            Row(TAR, tar_row.steps, teardown=tar_row.teardown, floor=True),
        ], files, nbytes, note="" if is_root() else "the exfat-fuse row needs root (loop devices)")

    def copy_image_row(self, spec: Path, stem: Path) -> Row:
        """`cp --sparse=always` + `sync` of the image `spec` builds (built once per bench
        run by this binary, untimed): what writing the output's own bytes costs, the least
        any builder of that image can do."""
        src = stem.with_name(stem.stem + "-source" + stem.suffix)
        dst = stem.with_name(stem.stem + "-copy" + stem.suffix)
        src.unlink(missing_ok=True)

        def setup(_c: dict) -> None:
            if not src.exists():
                quiet([self.bw, "build", str(spec), "-o", str(src), "-q"])
            dst.unlink(missing_ok=True)
        return Row("cp --sparse=always of the finished image + sync", lambda c: [
            Step(["cp", "--sparse=always", str(src), str(dst)]), sync(dst)],
            setup=setup, teardown=rm(dst))

    def describe(self, name: str) -> str:
        files, nbytes = self.stats[name]
        what = {"nested": "nested", "flat": "in one directory", "big": "large files",
                "boot": "boot tree", "text": "nested text",
                "empty": "empty, 1,000 per directory"}[self.shapes[name].kind]
        if nbytes >= GIB:
            amount = f"{nbytes / GIB:.1f} GiB"
        elif nbytes == 0:
            amount = "0 bytes"
        elif nbytes >= 10e6:
            amount = f"{nbytes / 1e6:.0f} MB"
        else:
            amount = f"{nbytes / 1e6:.2f} MB"
        return f"{name}: {files:,} files / {amount} {what}"

    # -- Raspberry Pi OS-style image -----------------------------------------------------
    def rpi_root_bytes(self, root: str) -> int:
        _files, nbytes = self.stats[root]
        # Room for the tree plus ext4's metadata, rounded to 256 MiB, at least 1 GiB
        # (--quick: 64 MiB steps, at least 128 MiB).
        step, least = (64 * MIB, 128 * MIB) if self.args.quick else (256 * MIB, GIB)
        need = nbytes * 3 // 2 + step
        return max(least, (need + step - 1) // step * step)

    def build_rpi(self, root: str, out: Path) -> Path:
        """An RPi image built (untimed) by blockwise, for the verify and write groups."""
        boot = self.tree("boot")
        tree = self.tree(root)
        spec = rpi_spec(self.specs / f"rpi-{root}.toml", boot, tree, self.boot_bytes,
                        self.rpi_root_bytes(root))
        if not out.exists():
            quiet([self.bw, "build", str(spec), "-o", str(out), "-q"])
        return out

    def rpi_case(self, root: str) -> Case:
        boot = self.tree("boot")
        tree = self.tree(root)
        root_bytes = self.rpi_root_bytes(root)
        bb = self.boot_bytes
        total = 8 * MIB + bb + root_bytes
        files = self.stats["boot"][0] + self.stats[root][0]
        nbytes = self.stats["boot"][1] + self.stats[root][1]
        o = self.out
        spec = rpi_spec(self.specs / f"rpi-{root}.toml", boot, tree, self.boot_bytes, root_bytes)
        ours = o / f"rpi-{root}-blockwise.img"

        gen = o / f"genimage-{root}"
        cfg = self.specs / f"genimage-{root}.cfg"
        cfg.write_text(
            f'image boot.vfat {{\n  vfat {{ label = "BOOTFS" }}\n  size = {bb // MIB}M\n'
            f'  srcpath = {toml_str(boot)}\n  temporary = true\n}}\n'
            f'image root.ext4 {{\n  ext4 {{ label = "rootfs" use-mke2fs = true }}\n'
            f'  size = {root_bytes // MIB}M\n  srcpath = {toml_str(tree)}\n  temporary = true\n}}\n'
            f'image rpi.img {{\n  hdimage {{ partition-table-type = "mbr" align = 8M }}\n'
            f'  partition boot {{ partition-type = 0xC bootable = true image = "boot.vfat" }}\n'
            f'  partition root {{ partition-type = 0x83 image = "root.ext4" }}\n}}\n'
        )

        def gen_setup(_c: dict) -> None:
            shutil.rmtree(gen, ignore_errors=True)
            for d in ("root", "input", "output"):
                (gen / d).mkdir(parents=True)

        pigen = o / f"pigen-{root}"
        img = pigen / "rpi.img"
        bootimg = pigen / "boot.vfat"
        rootimg = pigen / "root.ext4"
        table = (f"label: dos\nlabel-id: 0x5452574f\n"
                 f"start=16384, size={bb // 512}, type=c, bootable\n"
                 f"start={(8 * MIB + bb) // 512}, size={root_bytes // 512}, type=83\n").encode()

        def pigen_setup(_c: dict) -> None:
            shutil.rmtree(pigen, ignore_errors=True)
            pigen.mkdir(parents=True)

        return Case("rpi", f"RPi OS-style image: MBR, 8 MiB alignment, {bb // MIB} MiB FAT32 boot "
                    f"({self.stats['boot'][0]} files) + {root_bytes / GIB:g} GiB ext4 root from "
                    f"{root} ({total / GIB:.2f} GiB image)", [
                        Row("blockwise build", lambda c: [
                            Step([self.bw, "build", str(spec), "-o", str(ours), "-q"])],
                            teardown=rm(ours), blockwise=True),
                        Row("genimage (vfat + ext4 + hdimage, align = 8M)", lambda c: [
                            Step(["genimage", "--config", str(cfg), "--rootpath",
                                  str(gen / "root"), "--tmppath", str(gen / "tmp"),
                                  "--inputpath", str(gen / "input"), "--outputpath",
                                  str(gen / "output")]),
                            sync(gen / "output" / "rpi.img")],
                            setup=gen_setup, teardown=rm(gen)),
                        Row("pi-gen way: sfdisk, mkfs.fat + mcopy, mke2fs -d, dd", lambda c: [
                            Step(["truncate", "-s", str(total), str(img)]),
                            Step(["sfdisk", "-q", str(img)], stdin=table),
                            mkfs_fat_step(self.bw, bootimg, bb, "BOOTFS"),
                            mcopy_step(bootimg, boot),
                            *mke2fs_steps(rootimg, tree, root_bytes, "rootfs"),
                            Step(["dd", f"if={bootimg}", f"of={img}", "bs=4M", "seek=2",
                                  "conv=notrunc,sparse"]),
                            Step(["dd", f"if={rootimg}", f"of={img}", "bs=4M", f"seek={(8 * MIB + bb) // (4 * MIB)}",
                                  "conv=notrunc,sparse"]),
                            sync(img)], setup=pigen_setup, teardown=rm(pigen)),
                    ], files, nbytes)

    # -- read-only filesystems (issue 28) -------------------------------------------------
    def rofs_cases(self, name: str) -> list[Case]:
        tree = self.tree(name)
        files, nbytes = self.stats[name]
        o, sp = self.out, self.specs

        def spec(stem: str, fs: str, opts: str, verity: bool = False) -> Path:
            text = (f'[image]\ntable = "{"gpt" if verity else "none"}"\nseed = 1\n'
                    f"timestamp = {TIMESTAMP}\n\n"
                    f'[[partition]]\nname = "sys"\nfs = "{fs}"\ncontents = {toml_str(tree)}\n'
                    f"{opts}\n")
            if verity:
                text += '\n[[partition]]\nname = "sys-verity"\nfs = "verity"\nof = "sys"\n'
            p = sp / f"{stem}.toml"
            p.write_text(text)
            return p

        def build(label: str, stem: str, fs: str, opts: str, verity: bool = False) -> Row:
            s, out = spec(stem, fs, opts, verity), o / f"{stem}.img"
            # A bare image is the filesystem; with verity it is a GPT disk (no size compared).
            return Row(label, lambda c: [Step([self.bw, "build", str(s), "-o", str(out), "-q"])],
                       teardown=rm(out, Path(str(out) + ".roothash")), blockwise=True,
                       output=None if verity else out)

        def peer(label: str, out: Path, argv: list[str], env: Optional[dict] = None) -> Row:
            return Row(label, lambda c: [Step(argv, env=env), sync(out)], setup=rm(out),
                       teardown=rm(out), output=out)

        cases = []
        for comp in ("gzip", "xz", "zstd", "lz4"):
            mk = o / f"{name}-mksquashfs-{comp}.sq"
            cases.append(Case("rofs", f"{self.describe(name)} → squashfs {comp}, 128 KiB blocks", [
                build("blockwise build", f"{name}-sq-{comp}", "squashfs",
                      f'squashfs = {{ compression = "{comp}" }}'),
                peer(f"mksquashfs -comp {comp} (all cores)", mk,
                     ["mksquashfs", str(tree), str(mk), "-noappend", "-quiet", "-no-progress",
                      "-comp", comp, "-mkfs-time", str(TIMESTAMP)]),
                peer(f"mksquashfs -comp {comp} -processors 1", mk,
                     ["mksquashfs", str(tree), str(mk), "-noappend", "-quiet", "-no-progress",
                      "-comp", comp, "-mkfs-time", str(TIMESTAMP), "-processors", "1"]),
            ], files, nbytes))
        me = o / f"{name}-mkfs.erofs"
        cases.append(Case("rofs", f"{self.describe(name)} → EROFS, uncompressed", [
            build("blockwise build", f"{name}-erofs", "erofs", ""),
            peer("mkfs.erofs (uncompressed)", me, ["mkfs.erofs", "--quiet", str(me), str(tree)],
                 {"SOURCE_DATE_EPOCH": str(TIMESTAMP)}),
            build('blockwise build, backend = "mkfs.erofs"', f"{name}-erofs-tool", "erofs",
                  'erofs = { backend = "mkfs.erofs" }'),
        ], files, nbytes))
        mz = o / f"{name}-mkfs.erofs-lz4hc"
        cases.append(Case("rofs", f"{self.describe(name)} → EROFS lz4hc", [
            build('blockwise build, backend = "mkfs.erofs"', f"{name}-erofs-lz4hc", "erofs",
                  'erofs = { compression = "lz4hc", backend = "mkfs.erofs" }'),
            peer("mkfs.erofs -zlz4hc", mz, ["mkfs.erofs", "--quiet", "-zlz4hc", str(mz), str(tree)],
                 {"SOURCE_DATE_EPOCH": str(TIMESTAMP)}),
        ], files, nbytes))
        mv, hv = o / f"{name}-v.erofs", o / f"{name}-v.hash"
        cases.append(Case("rofs", f"{self.describe(name)} → EROFS + dm-verity partition", [
            build("blockwise build", f"{name}-erofs-verity", "erofs", "", verity=True),
            Row("mkfs.erofs + veritysetup format", lambda c: [
                Step(["mkfs.erofs", "--quiet", str(mv), str(tree)],
                     env={"SOURCE_DATE_EPOCH": str(TIMESTAMP)}),
                Step(["veritysetup", "format", str(mv), str(hv)]), sync(mv), sync(hv)],
                setup=rm(mv, hv), teardown=rm(mv, hv)),
        ], files, nbytes))
        return cases

    # -- verify --------------------------------------------------------------------------
    def loop(self, img: Path, offset: int, size: int) -> str:
        dev = subprocess.run(["losetup", "-r", "-f", "--show", "-o", str(offset),
                              "--sizelimit", str(size), str(img)],
                             check=True, capture_output=True, text=True).stdout.strip()
        self.loops.append(dev)
        return dev

    def partitions(self, img: Path) -> list[tuple[int, int]]:
        j = json.loads(subprocess.run(["sfdisk", "--json", str(img)], check=True,
                                      capture_output=True, text=True).stdout)
        return [(p["start"] * 512, p["size"] * 512) for p in j["partitiontable"]["partitions"]]

    def verify_cases(self) -> list[Case]:
        cases = []
        big = self.out / "verify-32g.img"
        spec = self.specs / "verify-32g.toml"
        boot = self.tree("boot")
        root = self.tree("T1")
        rpi_spec(spec, boot, root, self.boot_bytes, 32 * GIB - 8 * MIB - self.boot_bytes)
        if not big.exists():
            quiet([self.bw, "build", str(spec), "-o", str(big), "-q"])
        for img, what in [(self.build_rpi("T1", self.out / "verify-rpi-T1.img"),
                           "the RPi image from T1"),
                          (big, "a 32 GiB sparse RPi-style image")]:
            rows = [Row("blockwise verify", lambda c, img=img: [Step([self.bw, "verify",
                                                                      str(img)])],
                        blockwise=True)]
            if is_root():
                (b_off, b_size), (r_off, r_size) = self.partitions(img)[:2]
                bdev = self.loop(img, b_off, b_size)
                rdev = self.loop(img, r_off, r_size)
                rows.append(Row("sfdisk --json + fsck.fat -n + dumpe2fs -h",
                                lambda c, img=img, bdev=bdev, rdev=rdev: [
                                    Step(["sfdisk", "--json", str(img)]),
                                    Step(["fsck.fat", "-n", bdev]),
                                    Step(["dumpe2fs", "-h", rdev])]))
            else:
                log("   verify peers need loop devices for fsck.fat/dumpe2fs: not root, skipped")
            cases.append(Case("verify", f"verify {what} ({img.stat().st_size / GIB:.2f} GiB, "
                              f"{os.stat(img).st_blocks * 512 / MIB:.0f} MiB allocated)",
                              rows, 0, 0, note="peers on read-only loop devices"))
        return cases

    # -- write ---------------------------------------------------------------------------
    def write_cases(self) -> list[Case]:
        if not is_root():
            log("SKIP write: needs root (loop devices)")
            return []
        full = self.out / "write-full.img"
        full_bytes = 64 * MIB if self.args.quick else GIB
        if not full.exists() or full.stat().st_size != full_bytes:
            write_random(full, random.Random("blockwise-compare-write"), full_bytes)
        rpi = self.build_rpi("T1", self.out / "write-rpi-T1.img")
        bmaps = self.out / "bmap"  # not beside the images: blockwise maps them by SEEK_DATA
        bmaps.mkdir(exist_ok=True)
        cases = []
        for img, what in [(full, "a fully mapped image"),
                          (rpi, "the RPi image from T1 (sparse)")]:
            size = img.stat().st_size
            bmap, beside = with_bmap(img, bmaps / (img.name + ".bmap"))
            backing = self.out / "loop-backing.bin"

            def setup(c: dict, size: int = size, backing: Path = backing) -> None:
                attach_loop(c, backing, size)

            def teardown(c: dict, backing: Path = backing) -> None:
                detach_loop(c, backing)

            # Random bytes are no disk image: blockwise refuses them without --raw.
            raw = ["--raw"] if img == full else []
            rows = [
                Row(BW_WRITE, lambda c, img=img, raw=raw: [
                    Step([self.bw, "write", str(img), c["dev"], "--yes", "-q", "--no-verify",
                          *raw])],
                    setup=setup, teardown=teardown, blockwise=True),
                Row(BW_WRITE_BMAP, lambda c, img=beside, raw=raw: [
                    Step([self.bw, "write", str(img), c["dev"], "--yes", "-q", "--no-verify",
                          *raw])],
                    setup=setup, teardown=teardown, blockwise=True),
            ]
            if img == rpi:
                rows.append(Row("blockwise write --no-verify --zero-holes", lambda c, img=img: [
                    Step([self.bw, "write", str(img), c["dev"], "--yes", "-q", "--no-verify",
                          "--zero-holes"])], setup=setup, teardown=teardown, blockwise=True))
            rows += [
                Row("dd bs=4M oflag=direct conv=fsync", lambda c, img=img: [
                    Step(["dd", f"if={img}", f"of={c['dev']}", "bs=4M", "oflag=direct",
                          "conv=fsync"])], setup=setup, teardown=teardown),
                Row("bmaptool copy (checksums on)", lambda c, img=img, bmap=bmap: [
                    Step(["bmaptool", "-q", "copy", "--bmap", str(bmap), str(img), c["dev"]])],
                    setup=setup, teardown=teardown),
            ]
            mapped = os.stat(img).st_blocks * 512
            cases.append(Case("write", f"write {what}: {size / GIB:.2f} GiB, "
                              f"{mapped / MIB:.0f} MiB mapped, onto a loop device "
                              f"(--direct-io=on, fresh backing file per run)", rows, 0, size))
        cases += self.throttled_write_case(full)
        return cases

    def throttled_write_case(self, full: Path) -> list[Case]:
        """The fully mapped image's first 256 MiB written at an SD card's speed: the loop
        device throttled to 40 MB/s by the blkio cgroup (v1), with and without its .bmap
        beside it. On a device as fast as memory the SHA-256 of every range competes with the
        write for the CPU; on a card it should cost nothing."""
        cg = Path("/sys/fs/cgroup/blkio")
        if not (cg / "blkio.throttle.write_bps_device").exists():
            log("SKIP throttled write: no blkio cgroup (v1) to throttle a loop device with")
            return []
        grp = cg / "blockwise-compare"
        grp.mkdir(exist_ok=True)
        n = 16 * MIB if self.args.quick else 256 * MIB
        img = self.out / "write-throttled.img"
        if not img.exists() or img.stat().st_size != n:
            with open(full, "rb") as src, open(img, "wb") as dst:
                dst.write(src.read(n))
        (self.out / "bmap").mkdir(exist_ok=True)
        _, beside = with_bmap(img, self.out / "bmap" / "write-throttled.img.bmap")
        backing = self.out / "loop-backing.bin"
        bps = 40 * 1000 * 1000

        def setup(c: dict) -> None:
            attach_loop(c, backing, n)
            rdev = os.stat(c["dev"]).st_rdev
            c["majmin"] = f"{os.major(rdev)}:{os.minor(rdev)}"
            (grp / "blkio.throttle.write_bps_device").write_text(f"{c['majmin']} {bps}\n")

        def teardown(c: dict) -> None:
            if "majmin" in c:
                (grp / "blkio.throttle.write_bps_device").write_text(f"{c['majmin']} 0\n")
            detach_loop(c, backing)

        def in_group(argv: list[str]) -> list[str]:
            # The command joins the throttled group before it starts.
            return ["sh", "-c", f'echo $$ > {grp}/tasks && exec "$@"', "sh", *argv]

        rows = [
            Row(BW_WRITE, lambda c: [Step(in_group(
                [self.bw, "write", str(img), c["dev"], "--yes", "-q", "--no-verify", "--raw"]))],
                setup=setup, teardown=teardown, blockwise=True),
            Row(BW_WRITE_BMAP, lambda c: [Step(in_group(
                [self.bw, "write", str(beside), c["dev"], "--yes", "-q", "--no-verify", "--raw"]))],
                setup=setup, teardown=teardown, blockwise=True),
            Row("dd bs=4M oflag=direct conv=fsync", lambda c: [Step(in_group(
                ["dd", f"if={img}", f"of={c['dev']}", "bs=4M", "oflag=direct", "conv=fsync"]))],
                setup=setup, teardown=teardown),
        ]
        return [Case("write", f"write a fully mapped image at an SD card's speed: "
                     f"{n / MIB:.0f} MiB onto a loop device throttled to 40 MB/s "
                     f"(blkio cgroup, --direct-io=on)", rows, 0, n)]

    # -- encode: containers straight from the map vs raw image + compressor ---------------
    def encode_cases(self) -> list[Case]:
        """`build -o .simg/.img.zst/.img.xz` against `build -o .img` then img2simg /
        `zstd -T0` / `xz -T0` (issue 27), for the RPi image from T1 at its own size and
        grown to 8 GiB (the same data, more free space); and writing the .simg (simg2img
        onto the device, and `blockwise write` when it reads Android sparse) vs the raw image."""
        boot = self.tree("boot")
        tree = self.tree("T1")
        bb = self.boot_bytes
        o = self.out
        files = self.stats["boot"][0] + self.stats["T1"][0]
        nbytes = self.stats["boot"][1] + self.stats["T1"][1]
        big = 2 * GIB if self.args.quick else 8 * GIB
        cases = []
        for tag, root_bytes in [("rpi", self.rpi_root_bytes("T1")),
                                (f"rpi{big // GIB}g", big - 8 * MIB - bb)]:
            spec = rpi_spec(self.specs / f"encode-{tag}.toml", boot, tree, bb, root_bytes)
            size = 8 * MIB + bb + root_bytes
            raw = o / f"enc-{tag}.img"
            what = f"RPi image from T1, {size / GIB:.2f} GiB"
            for fmt, ext, peer, peer_steps, peer_out in [
                ("Android sparse", ".simg", "img2simg",
                 lambda raw, out: [Step(["img2simg", str(raw), str(out)])], None),
                ("seekable zstd (level 3)", ".img.zst", "zstd -T0",
                 lambda raw, out: [Step(["zstd", "-q", "-T0", "-f", str(raw), "-o", str(out)])],
                 None),
                ("xz (level 6)", ".img.xz", "xz -T0",
                 lambda raw, out: [Step(["xz", "-q", "-T0", "-k", "-f", str(raw)])],
                 raw.with_name(raw.name + ".xz")),
                # Like with like on this machine's cores: xz with as many threads as
                # blockwise's packer pool (one per core).
                ("xz (level 6), xz -T2", ".img.xz", "xz -T2",
                 lambda raw, out: [Step(["xz", "-q", "-T2", "-k", "-f", str(raw)])],
                 raw.with_name(raw.name + ".xz")),
            ]:
                ours = o / f"enc-{tag}-blockwise{ext}"
                two = peer_out or o / f"enc-{tag}-peer{ext}"
                cases.append(Case("encode", f"{what} → {fmt}", [
                    Row(f"blockwise build -o {ext}", lambda c, spec=spec, ours=ours: [
                        Step([self.bw, "build", str(spec), "-o", str(ours), "-q"])],
                        teardown=rm(ours)),
                    Row(f"blockwise build -o .img, then {peer}",
                        lambda c, spec=spec, raw=raw, two=two, ps=peer_steps: [
                            Step([self.bw, "build", str(spec), "-o", str(raw), "-q"]),
                            *ps(raw, two), sync(two)],
                        teardown=rm(raw, two)),
                ], files, nbytes))
        cases += self.encode_write_cases(boot, tree)
        return cases

    def encode_write_cases(self, boot: Path, tree: Path) -> list[Case]:
        if not is_root():
            log("SKIP encode write rows: need root (loop devices)")
            return []
        spec = self.specs / "encode-rpi.toml"
        raw = self.out / "encw-rpi.img"
        simg = self.out / "encw-rpi.simg"
        # Built untimed; no .bmap beside the images (write would pick it up).
        quiet([self.bw, "build", str(spec), "-o", str(raw), "-q"])
        quiet([self.bw, "build", str(spec), "-o", str(simg), "-q"])
        size = raw.stat().st_size
        backing = self.out / "loop-backing.bin"

        def setup(c: dict) -> None:
            attach_loop(c, backing, size)

        def teardown(c: dict) -> None:
            detach_loop(c, backing)

        # The raw image's .bmap under another name (write would pick up encw-rpi.img.bmap
        # for the rows without one): without it the image's zeros are written too.
        bmap = self.out / "encw-rpi.map.bmap"
        quiet([self.bw, "build", str(spec), "-o", str(self.out / "encw-rpi-b.img"), "-q",
               "--bmap", str(bmap)])
        (self.out / "encw-rpi-b.img").unlink(missing_ok=True)
        rows = [
            Row("blockwise write .img --bmap --no-verify", lambda c: [
                Step([self.bw, "write", str(raw), c["dev"], "--bmap", str(bmap), "--yes", "-q",
                      "--no-verify"])],
                setup=setup, teardown=teardown, blockwise=True),
            Row("blockwise write .img (no .bmap: zeros written) --no-verify", lambda c: [
                Step([self.bw, "write", str(raw), c["dev"], "--yes", "-q", "--no-verify"])],
                setup=setup, teardown=teardown, blockwise=True),
            Row("simg2img .simg onto the device + sync", lambda c: [
                Step(["simg2img", str(simg), c["dev"]]), Step(["sync", c["dev"]])],
                setup=setup, teardown=teardown),
        ]
        # `blockwise write` of an Android sparse image (issue 27 item 4): a row when this
        # blockwise reads them (writes the .simg to a file and compares with the raw image).
        probe = self.out / "encw-probe.img"
        probe.unlink(missing_ok=True)
        with open(probe, "wb") as f:
            f.truncate(size)
        p = subprocess.run([self.bw, "write", str(simg), str(probe), "--yes", "-q",
                            "--no-verify"], capture_output=True)
        same = p.returncode == 0 and subprocess.run(["cmp", "-s", str(probe), str(raw)]).returncode == 0
        probe.unlink(missing_ok=True)
        if same:
            rows.insert(1, Row("blockwise write .simg --no-verify", lambda c: [
                Step([self.bw, "write", str(simg), c["dev"], "--yes", "-q", "--no-verify"])],
                setup=setup, teardown=teardown, blockwise=True))
        else:
            log("   blockwise write does not read Android sparse images here: row left out")
        mapped = os.stat(raw).st_blocks * 512
        return [Case("encode", f"write the RPi image from T1: {size / GIB:.2f} GiB, "
                     f"{mapped / MIB:.0f} MiB mapped, as .img and as .simg "
                     f"({simg.stat().st_size / MIB:.0f} MiB), onto a loop device "
                     "(--direct-io=on, fresh backing file per run)", rows, 0, size)]

    def cleanup_loops(self) -> None:
        for dev in self.loops:
            subprocess.run(["losetup", "-d", dev], check=False)
        self.loops.clear()


# ---------------------------------------------------------------------------------------
# Setup: build, peers, versions


def install_peers() -> None:
    missing = sorted({pkg for cmd, pkg in PEERS.items() if not have(cmd)})
    if not missing:
        return
    if not (is_root() and have("apt-get")):
        log(f"missing peers (their rows fail or are skipped): {' '.join(missing)}")
        return
    log(f"installing peers: {' '.join(missing)}")
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    subprocess.run(["apt-get", "update", "-qq"], check=True, env=env)
    subprocess.run(["apt-get", "install", "-y", "-qq", *missing], check=True, env=env,
                   stdout=subprocess.DEVNULL)


def first_line(argv: list[str]) -> Optional[str]:
    try:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    for line in (p.stdout + "\n" + p.stderr).splitlines():
        if line.strip() and "unrecognized" not in line and "Usage" not in line:
            return line.strip()
    return None


def pkg_version(pkg: str) -> Optional[str]:
    try:
        p = subprocess.run(["dpkg-query", "-W", "-f", "${Version}", pkg], capture_output=True,
                           text=True)
    except OSError:
        return None
    return f"{pkg} {p.stdout.strip()}" if p.returncode == 0 and p.stdout.strip() else None


def versions(bw: str) -> dict[str, str]:
    v = {
        "blockwise": first_line([bw, "--version"]),
        "mkfs.fat / fsck.fat": pkg_version("dosfstools"),
        "mcopy": first_line(["mcopy", "--version"]),
        "mke2fs / dumpe2fs": first_line(["mke2fs", "-V"]),
        "genimage": (lambda s: f"genimage {s}" if s else None)(first_line(["genimage",
                                                                            "--version"])),
        "sfdisk": first_line(["sfdisk", "--version"]),
        "tar": first_line(["tar", "--version"]),
        "dd": first_line(["dd", "--version"]),
        "bmaptool": first_line(["bmaptool", "--version"]),
        "mksquashfs": first_line(["mksquashfs", "-version"]),
        "mkfs.erofs": pkg_version("erofs-utils"),
        "veritysetup": first_line(["veritysetup", "--version"]),
    }
    return {k: x or "not installed" for k, x in v.items()}


def fs_type(path: Path) -> str:
    p = subprocess.run(["findmnt", "-n", "-o", "FSTYPE,SOURCE", "--target", str(path)],
                       capture_output=True, text=True)
    return " ".join(p.stdout.split()) or "unknown"


# ---------------------------------------------------------------------------------------
# Report: works on plain dicts, so that results of earlier runs (--only) can be merged


def case_dict(c: Case, runs: int, meta: dict) -> dict:
    return {
        "group": c.group,
        "name": c.name,
        "files": c.files,
        "runs": runs,
        "date": meta["date"],
        "load": meta["load"],
        "rows": [{"tool": r.tool, "blockwise": r.blockwise, "floor": r.floor,
                  "s": summary(r), "error": r.error, "skipped": r.skipped} for r in c.rows],
    }


def ratio(a: Optional[dict], b: Optional[dict]) -> Optional[float]:
    if a is None or b is None or b["median"] <= 0:
        return None
    return a["median"] / b["median"]


def fmt_ratio(x: Optional[float]) -> str:
    return "–" if x is None else f"{x:.3f}"


BWB = "blockwise build"
MKE2FS_BACKEND = 'blockwise build, backend = "mke2fs"'
TAR = "tar -cf - | cat (floor)"
MTOOLS = "mkfs.fat -F 32 -C + mcopy -s"
MKE2FS = "mke2fs -t ext4 -d"
GENIMAGE = "genimage (vfat + ext4 + hdimage, align = 8M)"
DD = "dd bs=4M oflag=direct conv=fsync"
BW_WRITE = "blockwise write --no-verify"
BW_WRITE_BMAP = "blockwise write --no-verify, IMAGE.bmap beside (checked)"


def goals(cases: list[dict]) -> list[tuple[str, str, bool]]:
    """(goal, measured, met) for each goal of issues 14 and 34 whose rows ran."""
    def find(group: str, fs: str, tool: str) -> tuple[Optional[dict], int]:
        for c in cases:
            if c["group"] == group and fs in c["name"]:
                for r in c["rows"]:
                    if r["tool"] == tool:
                        return r["s"], c["files"]
        return None, 0

    out: list[tuple[str, str, bool]] = []

    def add(goal: str, x: Optional[float], limit: float, fmt: str = "{:.3f}×",
            above: bool = False) -> None:
        if x is not None:
            out.append((goal, fmt.format(x), x >= limit if above else x <= limit))

    def r(group: str, fs: str, peer: str) -> Optional[float]:
        return ratio(find(group, fs, BWB)[0], find(group, fs, peer)[0])

    # Issue 14: against the peers.
    add("T1 FAT32 ≤ 1.0× mkfs.fat + mcopy (14)", r("T1", "FAT32", MTOOLS), 1.0)
    add("T1 ext4 ≤ 0.5× mke2fs -d (14)", r("T1", "ext4", MKE2FS), 0.5)
    add("T2 FAT32 ≤ 0.05× mkfs.fat + mcopy (14)", r("T2", "FAT32", MTOOLS), 0.05)
    add("T2 ext4 ≤ 0.05× mke2fs -d (14)", r("T2", "ext4", MKE2FS), 0.05)
    for c in cases:
        if c["group"] == "rpi":
            s = {x["tool"]: x["s"] for x in c["rows"]}
            root = c["name"].split(" from ")[1].split(" ")[0]
            add(f"RPi image from {root} ≤ 0.5× genimage (14)",
                ratio(s.get(BWB), s.get(GENIMAGE)), 0.5)
    # Issue 34: every build at the floor whatever the tree's shape (T2, many small files in
    # one directory: 1.5×), a million empty files in 10 s, bounded memory.
    for c in cases:
        s = {x["tool"]: x["s"] for x in c["rows"]}
        floor = s.get(TAR)
        if floor is None:
            continue
        fs = c["name"].split(" → ")[-1]
        limit = 1.5 if c["group"] == "T2" else 1.2
        for x in c["rows"]:
            if x["tool"] == BWB:
                add(f"{c['group']} {fs.split(' (')[0]} ≤ {limit}× the floor (34)",
                    ratio(x["s"], floor), limit)
    for fs in ("FAT32", "ext4"):
        a, _ = find("M1", fs, BWB)
        if a:
            out.append((f"1,000,000 empty files → {fs} ≤ 10 s (34)", f"{a['median']:.2f} s",
                        a["median"] <= 10.0))
    # The memory budget for every blockwise row; the native builds (the default) and the
    # mke2fs backend (which holds the filesystem it copies in memory) are reported apart.
    for label, pick in [("native builds and writes", lambda t: t != MKE2FS_BACKEND),
                        ('backend = "mke2fs" builds', lambda t: t == MKE2FS_BACKEND)]:
        worst: Optional[tuple[float, str]] = None
        for c in cases:
            for x in c["rows"]:
                s = x["s"]
                if x["blockwise"] and s and c["group"] not in ("verify", "write", "encode", "rofs") \
                        and pick(x["tool"]):
                    budget = 64 + c["files"] * 256 / MIB
                    frac = s["rss_mib"] / budget
                    if worst is None or frac > worst[0]:
                        worst = (frac, f"worst {s['rss_mib']:.1f} MiB of {budget:.1f} MiB "
                                 f"({c['group']}, {c['name'].split(' → ')[-1][:40]})")
        if worst:
            out.append((f"peak RSS ≤ 64 MiB + 256 B per file, {label} (34)", worst[1],
                        worst[0] <= 1.0))
    for c in cases:
        s = {x["tool"]: x["s"] for x in c["rows"]}
        if c["group"] == "verify" and "32 GiB" in c["name"] and s.get("blockwise verify"):
            t = s["blockwise verify"]["median"]
            out.append(("verify of a 32 GiB image < 50 ms (14)", f"{t * 1000:.1f} ms",
                        t < 0.05))
        if c["group"] == "encode" and " → " in c["name"] and len(c["rows"]) == 2:
            direct, two = c["rows"][0], c["rows"][1]
            add(f"{c['name'].replace('RPi image from T1, ', '')}: direct ≤ 0.5× the two steps "
                "(issue 27)", ratio(direct["s"], two["s"]), 0.5)
        throttled = "throttled" in c["name"]
        if c["group"] == "write" and "fully mapped" in c["name"] and not throttled:
            add("write ≥ 0.95× dd's throughput, fully mapped image (14)",
                ratio(s.get(DD), s.get(BW_WRITE)), 0.95, "{:.3f}×", True)
        if c["group"] == "write":
            what = "fully mapped" if "fully mapped" in c["name"] else "sparse RPi"
            if throttled:
                what += ", 40 MB/s device"
            add(f"write with the .bmap beside ≥ 0.95× the throughput without, {what} (34)",
                ratio(s.get(BW_WRITE), s.get(BW_WRITE_BMAP)), 0.95, "{:.3f}×", True)
    return out


def render(cases: list[dict], meta: dict, vers: dict[str, str]) -> str:
    L = []
    quick = " **QUICK smoke run: small trees, one run; not a measurement.**" if meta["quick"] \
        else ""
    L.append(f"Measured by `benches/compare.sh`: {meta['cores']} cores (nproc), kernel "
             f"{meta['kernel']}, work dir on {meta['fs']}.{quick} Times are medians "
             "[min–max] in seconds; peak RSS is the largest `/usr/bin/time -v` maximum resident "
             "set size over a row's runs and steps; the last column is blockwise's median "
             "divided by the row's. Every output is made durable as `blockwise build` does "
             "(temp file + fsync + rename): each peer's last step is a timed `sync FILE` "
             "(fsync); `blockwise write`, `dd conv=fsync` and `bmaptool copy` all sync the "
             "device. Warm page cache (sources read from memory after the first run).")
    L.append("")
    runs_of: dict[str, str] = {}
    for c in cases:
        runs_of.setdefault(c["group"], f"{c['group']}: {c['date']}, {c['runs']} "
                           f"run{'s' if c['runs'] > 1 else ''}, load average {c['load']}")
    L.append("Runs: " + "; ".join(runs_of.values()) + ".")
    loads = [float(x) for c in cases for x in c["load"].split("→") if x]
    if loads and max(loads) > meta["cores"]:
        L.append("")
        L.append(f"**Loaded machine:** the load average reached {max(loads):.0f} on "
                 f"{meta['cores']} cores (other jobs were running), so these timings are noisy; "
                 "compare rows of one case (they ran interleaved), not absolute times.")
    if meta.get("note"):
        L.append("")
        L.append(meta["note"])
    L.append("")
    L.append("| case | tool | median s | min–max s | peak RSS MiB | blockwise ÷ tool |")
    L.append("|---|---|---:|---:|---:|---:|")
    for c in cases:
        ours = c["rows"][0]["s"]
        for i, x in enumerate(c["rows"]):
            s = x["s"]
            name = c["name"] if i == 0 else ""
            if s is None:
                why = "not installed" if x.get("skipped") else "failed"
                L.append(f"| {name} | {x['tool']} | {why} | | | |")
                continue
            rr = "" if i == 0 else fmt_ratio(ratio(ours, s))
            L.append(f"| {name} | {x['tool']} | {s['median']:.3f} | "
                     f"{s['min']:.3f}–{s['max']:.3f} | {s['rss_mib']:.1f} | {rr} |")
    L.append("")
    sized = [c for c in cases if any(x["s"] and "out_mib" in x["s"] for x in c["rows"])]
    if sized:
        L.append("Image sizes of the read-only filesystems (the file each row wrote; "
                 "squashfs's `bytes_used` padded to 4 KiB, EROFS's blocks):")
        L.append("")
        L.append("| case | tool | image MiB | blockwise ÷ tool |")
        L.append("|---|---|---:|---:|")
        for c in sized:
            first = c["rows"][0]["s"] or {}
            for i, x in enumerate(c["rows"]):
                if not (x["s"] and "out_mib" in x["s"]):
                    continue
                mib = x["s"]["out_mib"]
                rel = f"{first['out_mib'] / mib:.3f}" if i > 0 and "out_mib" in first else ""
                L.append(f"| {c['name'] if i == 0 else ''} | {x['tool']} | {mib:.2f} | {rel} |")
        L.append("")
    gl = goals(cases)
    if gl:
        L.append("| goal (issue) | measured | met |")
        L.append("|---|---|---|")
        for goal, val, met in gl:
            L.append(f"| {goal} | {val} | {'yes' if met else '**no**'} |")
        L.append("")
    L.append("Versions: " + "; ".join(f"{k}: {v}" for k, v in vers.items()) + ".")
    return "\n".join(L) + "\n"


def print_table(cases: list[dict]) -> None:
    print()
    for c in cases:
        print(c["name"])
        ours = c["rows"][0]["s"]
        for i, x in enumerate(c["rows"]):
            s = x["s"]
            if s is None:
                print(f"    {x['tool']:<50} FAILED: {x['error']}")
                continue
            rr = "" if i == 0 else f"  blockwise/this {fmt_ratio(ratio(ours, s))}"
            print(f"    {x['tool']:<50} {s['median']:9.3f} s [{s['min']:.3f}–{s['max']:.3f}]"
                  f"  {s['rss_mib']:7.1f} MiB{rr}")
    print()
    for goal, val, met in goals(cases):
        print(f"{'MET ' if met else 'MISS'}  {goal}: {val}")


def update_readme(table_path: Path, text: str) -> None:
    readme = REPO / "docs" / "performance.md"
    body = readme.read_text()
    if BEGIN not in body or END not in body:
        log(f"docs/performance.md has no {BEGIN} … {END} markers: not updated")
        return
    head, rest = body.split(BEGIN, 1)
    _old, tail = rest.split(END, 1)
    try:
        rel: Path = table_path.relative_to(REPO)
    except ValueError:
        rel = table_path
    readme.write_text(f"{head}{BEGIN}\n<!-- written by benches/compare.sh (also in {rel}); "
                      f"do not edit by hand -->\n{text}{END}{tail}")
    log("docs/performance.md updated between the compare markers")


# ---------------------------------------------------------------------------------------


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="benches/compare.sh",
        description="Times blockwise against mkfs.fat+mcopy, mke2fs -d, tar, genimage, "
                    "the pi-gen way, sfdisk/fsck.fat/dumpe2fs, dd and bmaptool.")
    p.add_argument("--runs", type=int, help="runs per row (default 5; 1 with --quick)")
    p.add_argument("--runs-slow", type=int,
                   help="runs per row for T2, T3, T4, M1 and S16 (default: --runs)")
    p.add_argument("--only", help=f"comma-separated groups: {','.join(GROUPS)} (default: all)")
    p.add_argument("--quick", action="store_true",
                   help="small trees and 1 run: a smoke test, not a measurement")
    p.add_argument("--workdir", type=Path,
                   help="where trees and images go (default target/compare; not tmpfs)")
    p.add_argument("--keep", action="store_true",
                   help="keep the generated trees and images (reused by the next run)")
    p.add_argument("--debug", action="store_true",
                   help="use the dev-profile binary (target/debug): for smoke tests")
    p.add_argument("--results", type=Path,
                   help="Markdown output (default benches/results.md; WORKDIR/results.md "
                        "with --quick)")
    p.add_argument("--no-readme", action="store_true",
                   help="do not update docs/performance.md (never updated with --quick)")
    p.add_argument("--no-install", action="store_true", help="never run apt-get")
    p.add_argument("--note", help="a sentence added to the Markdown (e.g. about the machine)")
    p.add_argument("--report", action="store_true",
                   help="run nothing: rewrite the Markdown (and docs/performance.md) from WORKDIR/results.json")
    p.add_argument("--fresh", action="store_true",
                   help="forget the results of earlier runs in WORKDIR/results.json")
    a = p.parse_args(argv)
    a.runs = a.runs or (1 if a.quick else 5)
    a.runs_slow = a.runs_slow or a.runs
    if a.runs < 1 or a.runs_slow < 1:
        p.error("--runs must be at least 1")
    a.groups = GROUPS if not a.only else [g.strip() for g in a.only.split(",") if g.strip()]
    bad = [g for g in a.groups if g not in GROUPS]
    if bad:
        p.error(f"--only: unknown group {', '.join(bad)} (groups: {', '.join(GROUPS)})")
    default_work = REPO / "target" / ("compare-quick" if a.quick else "compare")
    a.workdir = (a.workdir or default_work).resolve()
    a.results = (a.results or (a.workdir / "results.md" if a.quick
                               else REPO / "benches" / "results.md")).resolve()
    return a


def main(argv: list[str]) -> int:
    a = parse_args(argv)
    a.workdir.mkdir(parents=True, exist_ok=True)
    fst = fs_type(a.workdir)
    if fst.split()[0] in ("tmpfs", "ramfs"):
        log(f"{a.workdir} is on {fst}: pick a disk-backed --workdir")
        return 2
    if not a.no_install:
        install_peers()
    if not have("/usr/bin/time"):
        log("needs /usr/bin/time (apt-get install time)")
        return 2
    profile = [] if a.debug else ["--release"]
    log(f"cargo build {' '.join(profile)}")
    subprocess.run(["cargo", "build", "--quiet", *profile], cwd=REPO, check=True)
    a.blockwise = str(REPO / "target" / ("debug" if a.debug else "release") / "blockwise")

    cores = len(os.sched_getaffinity(0))
    meta = {"cores": cores, "kernel": platform.release(), "fs": fst, "quick": a.quick,
            "note": a.note}
    vers = versions(a.blockwise)
    # Results of earlier runs in this work dir (other groups, --only) are merged, so a
    # group can be re-run alone; --fresh forgets them.
    store = a.workdir / "results.json"
    stored: list[dict] = []
    if store.exists() and not a.fresh:
        old = json.loads(store.read_text())
        if old.get("quick") == a.quick and old.get("cores") == cores:
            stored = old["cases"]
            meta["note"] = meta["note"] or old.get("note")

    def publish(done: list[dict], final: bool) -> None:
        ran = {c["group"] for c in done}
        merged = [c for c in stored if c["group"] not in ran] + done
        merged.sort(key=lambda c: GROUPS.index(c["group"]))
        store.write_text(json.dumps({**meta, "cases": merged}, indent=1))
        text = render(merged, meta, vers)
        a.results.parent.mkdir(parents=True, exist_ok=True)
        a.results.write_text(text)
        if not a.quick and not a.no_readme:
            update_readme(a.results, text)
        if final:
            print_table(merged)
            log(f"wrote {a.results} (and {store})")

    if a.report:
        if not stored:
            log(f"--report: no results in {store}")
            return 2
        a.groups = []
        done_groups = {c["group"] for c in stored}
        stored, done0 = [], [c for c in stored if c["group"] in done_groups]
        publish(done0, final=True)
        return 0
    b = Bench(a)
    done: list[dict] = []
    failed = 0
    try:
        for g in a.groups:
            if g in ("T1", "T2", "T3", "T4", "M1"):
                new = b.tree_cases(g)
            elif g == "S16":
                new = [b.sparse16_case()]
            elif g == "rpi":
                new = [b.rpi_case("T1"), b.rpi_case("T3")]
            elif g == "verify":
                new = b.verify_cases()
            elif g == "rofs":
                new = b.rofs_cases("T1") + b.rofs_cases("R1")
            elif g == "encode":
                new = b.encode_cases()
            else:
                new = b.write_cases()
            runs = a.runs_slow if g in ("T2", "T3", "T4", "M1", "S16", "encode") else a.runs
            load = "%.1f" % os.getloadavg()[0]
            date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
            for c in new:
                run_case(c, runs, b.logs)
            b.cleanup_loops()
            load = f"{load}→{os.getloadavg()[0]:.1f}"
            done += [case_dict(c, runs, {"date": date, "load": load}) for c in new]
            failed += sum(1 for c in new for r in c.rows if r.error and not r.skipped)
            # Partial results are usable: the table is rewritten after every group.
            publish(done, final=False)
    finally:
        b.cleanup_loops()
        if not a.keep:
            for d in ("trees", "out", "specs", "logs"):
                shutil.rmtree(a.workdir / d, ignore_errors=True)
        if done:
            publish(done, final=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
