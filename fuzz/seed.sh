#!/usr/bin/env bash
# Regenerates the seed corpora in fuzz/corpus/<target>/ (git-ignored): small images made with
# sfdisk / mkfs.fat / mke2fs / blockwise, cuts of them, the shared external corpus
# (../../shared/corpus, or $CORPUS), the example specs as TOML and JSON, a real bmaptool
# .bmap and small xz/zstd/gzip/bzip2 files. Needs: fdisk, dosfstools, e2fsprogs, bmap-tools,
# xz-utils, zstd, gzip, bzip2, python3; `blockwise` on PATH or $BLOCKWISE (optional: specs
# are then also built into small images).
set -euo pipefail
cd "$(dirname "$0")"
FUZZ=$PWD
ROOT=$(cd .. && pwd)
CORPUS=${CORPUS:-$ROOT/../shared/corpus}
C=$FUZZ/corpus
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
for t in parse_mbr parse_gpt parse_fat parse_exfat parse_ext4 parse_f2fs parse_other verify_bytes \
    spec_toml spec_json bmap compressed_sniff; do
    mkdir -p "$C/$t"
done
# put TARGET FILE [NAME]: copy FILE in as a seed (content-named when NAME is empty).
put() {
    local name=${3:-$(sha1sum "$2" | cut -c1-16)}
    cp "$2" "$C/$1/$name"
}

# --- images: MBR with logicals, GPT at 512 and 4096, FAT12/16/32, ext4 -------------------
truncate -s 4M "$T/mbr.img"
printf 'label: dos\nstart=2048, size=2048, type=c\nstart=4096, type=5\nstart=4200, size=1000, type=83\nstart=5300, type=83\n' |
    sfdisk -q "$T/mbr.img" >/dev/null
truncate -s 4M "$T/gpt.img"
printf 'label: gpt\nstart=2048, size=2048, type=uefi\nstart=4096, type=linux\n' |
    sfdisk -q "$T/gpt.img" >/dev/null
truncate -s 16M "$T/gpt4k.img"
printf 'label: gpt\nsector-size: 4096\nstart=256, size=1024, type=uefi\nstart=1280, type=linux\n' |
    sfdisk -q --sector-size 4096 "$T/gpt4k.img" >/dev/null 2>&1 || true
for i in mbr gpt gpt4k; do
    head -c 65536 "$T/$i.img" >"$T/$i.head"
    put parse_mbr "$T/$i.head" "$i"
    put parse_gpt "$T/$i.head" "$i"
    put verify_bytes "$T/$i.head" "$i"
done
tail -c 65536 "$T/gpt.img" >"$T/gpt.tail" && put parse_gpt "$T/gpt.tail" gpt-backup
for f in 12 16 32; do
    size=$((f == 32 ? 40 : 8))M
    truncate -s "$size" "$T/fat$f.img"
    mkfs.fat -F "$f" -s "$((f == 12 ? 4 : 1))" -n "SEED$f" "$T/fat$f.img" >/dev/null
    head -c 4096 "$T/fat$f.img" >"$T/fat$f.boot"
    put parse_fat "$T/fat$f.boot" "fat$f"
    head -c 262144 "$T/fat$f.img" >"$T/fat$f.head"
    put verify_bytes "$T/fat$f.head" "fat$f"
done
for b in 1024 4096; do
    truncate -s 8M "$T/ext4-$b.img"
    mke2fs -q -F -t ext4 -b "$b" -E root_owner=0:0 "$T/ext4-$b.img" >/dev/null
    dd if="$T/ext4-$b.img" of="$T/ext4-$b.sb" bs=1024 skip=1 count=5 status=none
    put parse_ext4 "$T/ext4-$b.sb" "ext4-$b"
    head -c 262144 "$T/ext4-$b.img" >"$T/ext4-$b.head"
    put verify_bytes "$T/ext4-$b.head" "ext4-$b"
done

# exFAT: mkfs.exfat with several options (exfatprogs), the boot regions and the first MiBs.
if command -v mkfs.exfat >/dev/null; then
    for o in "" "-c 4K" "-b 4M -L SEED" "-c 128K -b 8M"; do
        n=exfat$(echo "$o" | tr -d ' -')
        truncate -s 64M "$T/$n.img"
        # shellcheck disable=SC2086
        mkfs.exfat $o "$T/$n.img" >/dev/null
        head -c 16384 "$T/$n.img" >"$T/$n.boot"
        put parse_exfat "$T/$n.boot" "$n"
        head -c 262144 "$T/$n.img" >"$T/$n.head"
        put verify_bytes "$T/$n.head" "$n"
    done
fi

# --- F2FS (mkfs.f2fs -s/-z), and the formats verify names by their headers ------------------
# parse_other's first byte picks the parser: 0 NTFS, 1 btrfs, 2 XFS, 3 ISO 9660, 4 LUKS, 5 swap.
other() { # NAME PICK FILE OFFSET LENGTH
    { printf "\\x$(printf %02x "$2")"; dd if="$3" bs=1 skip="$4" count="$5" status=none 2>/dev/null ||
        tail -c +"$(($4 + 1))" "$3" | head -c "$5"; } >"$T/o" && put parse_other "$T/o" "$1"
}
if command -v mkfs.f2fs >/dev/null; then
    for sz in "1 1" "2 1" "2 2"; do
        set -- $sz
        truncate -s 256M "$T/f2fs.img"
        mkfs.f2fs -q -f -s "$1" -z "$2" -l SEED "$T/f2fs.img" >/dev/null
        head -c 8192 "$T/f2fs.img" >"$T/h" && put parse_f2fs "$T/h" "f2fs-s$1-z$2"
        head -c 262144 "$T/f2fs.img" >"$T/h" && put verify_bytes "$T/h" "f2fs-s$1-z$2"
    done
fi
if command -v mkfs.ntfs >/dev/null; then
    truncate -s 16M "$T/ntfs.img" && mkfs.ntfs -q -F -f -L SEED "$T/ntfs.img" >/dev/null 2>&1 &&
        { head -c 512 "$T/ntfs.img"; dd if="$T/ntfs.img" bs=1024 skip=$((4 * 4 + 3)) count=1 status=none; } >"$T/n" &&
        other ntfs 0 "$T/n" 0 1536
fi
if command -v mkfs.btrfs >/dev/null; then
    truncate -s 128M "$T/btrfs.img" && mkfs.btrfs -q -f -L SEED "$T/btrfs.img" >/dev/null 2>&1 &&
        other btrfs 1 "$T/btrfs.img" 65536 4096
fi
if command -v mkfs.xfs >/dev/null; then
    truncate -s 512M "$T/xfs.img" && mkfs.xfs -q -f -L SEED "$T/xfs.img" >/dev/null 2>&1 &&
        other xfs 2 "$T/xfs.img" 0 4096
fi
if command -v genisoimage >/dev/null; then
    mkdir -p "$T/iso" && echo hi >"$T/iso/a" && genisoimage -quiet -J -V SEED -o "$T/iso.img" "$T/iso" &&
        other iso 3 "$T/iso.img" 32768 32768
fi
if command -v cryptsetup >/dev/null; then
    printf k >"$T/key"
    for v in luks1 luks2; do
        truncate -s 20M "$T/$v.img" && cryptsetup luksFormat -q --type "$v" --pbkdf pbkdf2 \
            --pbkdf-force-iterations 1000 --key-file "$T/key" "$T/$v.img" >/dev/null 2>&1 &&
            other "$v" 4 "$T/$v.img" 0 16384
    done
fi
if command -v mkswap >/dev/null; then
    truncate -s 1M "$T/swap.img" && mkswap -q -L SEED "$T/swap.img" >/dev/null && other swap 5 "$T/swap.img" 0 4096
fi

# --- the shared external corpus: images, boot sectors, superblocks, tables -----------------
if [ -d "$CORPUS" ]; then
    while IFS= read -r f; do
        case "$f" in
        *.gz) gzip -dc "$f" >"$T/x" 2>/dev/null || continue ;;
        *.xz) xz -dc "$f" >"$T/x" 2>/dev/null || continue ;;
        *.bz2) bzip2 -dc "$f" >"$T/x" 2>/dev/null || continue ;;
        *.zst) zstd -qdc "$f" >"$T/x" 2>/dev/null || continue ;;
        *) cp "$f" "$T/x" ;;
        esac
        [ -s "$T/x" ] || continue
        head -c 262144 "$T/x" >"$T/h"
        put verify_bytes "$T/h"
        head -c 65536 "$T/x" >"$T/h"
        put parse_mbr "$T/h"
        put parse_gpt "$T/h"
        head -c 4096 "$T/x" >"$T/h"
        put parse_fat "$T/h"
        dd if="$T/x" of="$T/h" bs=1024 skip=1 count=5 status=none 2>/dev/null || true
        [ -s "$T/h" ] && put parse_ext4 "$T/h"
    done < <(find "$CORPUS" -type f \( -name '*.img*' -o -name '*.bin*' -o -name 'image*' \) -size -2M)
    # Small compressed files as they are.
    find "$CORPUS" -type f \( -name '*.gz' -o -name '*.xz' -o -name '*.bz2' -o -name '*.zst' \) \
        -size -64k | while IFS= read -r f; do put compressed_sniff "$f"; done
    # genimage configs: another spec language, good mutation material for the TOML parser.
    find "$CORPUS" -type f -name '*.config' -size -8k | head -20 |
        while IFS= read -r f; do put spec_toml "$f"; done
fi

# --- specs: the examples, hand-written edge cases, and the same as JSON --------------------
for f in "$ROOT"/examples/*.toml; do put spec_toml "$f" "$(basename "$f")"; done
cat >"$T/edge1.toml" <<'EOF'
[image]
size = "16EiB"
erase-block = "4MiB"
table = "gpt"
sector-size = 4096
[[partition]]
fs = "ext4"
size = "fill"

EOF
cat >"$T/edge2.toml" <<'EOF'
[image]
size = 18446744073709551615
table = "mbr"
[[partition]]
fs = "fat32"
size = "99%"
fat = { cluster = "64KiB" }
[[partition]]
fs = "raw"
source = "x.bin"
[[partition]]
fs = "none"
size = "fill"
EOF
cat >"$T/edge3.toml" <<'EOF'
[image]
size = "64MiB"
[[partition]]
fs = "fat12"
size = "1MiB"
label = "TINY"
[[partition]]
fs = "ext4"
size = "fill"
contents = "root/"
[[partition.entry]]
path = "/../etc/x"
kind = "symlink"
target = "/dev/null"
EOF
python3 - "$T/edge4.toml" <<'EOF'
import sys
with open(sys.argv[1], "w") as f:
    f.write('[image]\nsize = "2TiB"\ntable = "gpt"\n')
    for i in range(200):
        f.write('[[partition]]\nfs = "none"\nsize = "1MiB"\n')
EOF
# Whole floats are byte counts (up to 2^53); entry path components are at most 255 bytes.
python3 - "$T/edge5.toml" <<'EOF'
import sys
with open(sys.argv[1], "w") as f:
    f.write('[image]\nsize = 67108864.0\nerase-block = 1048576.0\n')
    f.write('[[partition]]\nfs = "fat16"\nsize = 9007199254740992.0\n')
    f.write('[[partition]]\nfs = "ext4"\nsize = 1.5e7\ncontents = "root/"\n')
    f.write('[[partition.entry]]\npath = "/%s/%s"\nkind = "dir"\n' % ("a" * 255, "b" * 256))
EOF
for e in edge1 edge2 edge3 edge4 edge5; do put spec_toml "$T/$e.toml" "$e.toml"; done
python3 - "$C/spec_toml" "$C/spec_json" <<'EOF'
import json, os, sys, tomllib
src, dst = sys.argv[1], sys.argv[2]
for name in sorted(os.listdir(src)):
    try:
        with open(os.path.join(src, name), "rb") as f:
            value = tomllib.load(f)
    except Exception:
        continue
    with open(os.path.join(dst, name.replace(".toml", "") + ".json"), "w") as f:
        json.dump(value, f)
EOF
printf '{"image":{"size":1e300},"partition":[{"fs":"fat32","size":-1}]}' >"$C/spec_json/numbers.json"
printf '{"image":{"size":16777216.0,"erase-block":-0.0},"partition":[{"fs":"fat12","size":1e308},{"fs":"none","size":4096.5}]}' >"$C/spec_json/floats.json"
printf '{"image":{"size":"1GiB"},"partition":[{"fs":"ext4","size":"fill","entry":[{"path":"/a","kind":"dir","mode":"0755"}]}]}' >"$C/spec_json/entry.json"

# Built images (when the CLI is there): MBR+FAT+ext4, GPT.
BW=${BLOCKWISE:-$(command -v blockwise || true)}
if [ -n "$BW" ]; then
    mkdir -p "$T/root"
    echo hi >"$T/root/hello"
    printf '[image]\nsize = "24MiB"\nerase-block = "1MiB"\n[[partition]]\nfs = "fat16"\nsize = "8MiB"\n[[partition]]\nfs = "ext4"\nsize = "fill"\ncontents = "root/"\n' >"$T/small.toml"
    printf '[image]\nsize = "8MiB"\ntable = "gpt"\nerase-block = "1MiB"\n[[partition]]\nfs = "fat12"\nsize = "fill"\n' >"$T/gpt.toml"
    for s in small gpt; do
        if "$BW" build "$T/$s.toml" -o "$T/$s.bw.img" >/dev/null 2>&1; then
            head -c 262144 "$T/$s.bw.img" >"$T/h" && put verify_bytes "$T/h" "bw-$s"
            head -c 65536 "$T/$s.bw.img" >"$T/h" && put parse_mbr "$T/h" "bw-$s" && put parse_gpt "$T/h" "bw-$s"
            cp "$T/$s.bw.img" "$T/$s.img"
        fi
    done
fi

# --- a real bmap, and compressed images -----------------------------------------------------
img=$T/small.img
[ -f "$img" ] || img=$T/fat12.img
bmaptool create "$img" -o "$T/real.bmap" 2>/dev/null && put bmap "$T/real.bmap" real.bmap
bmaptool create "$T/gpt.img" -o "$T/gpt.bmap" 2>/dev/null && put bmap "$T/gpt.bmap" gpt.bmap
head -c 200000 "$img" >"$T/payload"
xz -c -1 "$T/payload" >"$T/p.xz" && put compressed_sniff "$T/p.xz" payload.xz
zstd -q -c -1 "$T/payload" >"$T/p.zst" && put compressed_sniff "$T/p.zst" payload.zst
gzip -c -1 "$T/payload" >"$T/p.gz" && put compressed_sniff "$T/p.gz" payload.gz
bzip2 -c -1 "$T/payload" >"$T/p.bz2" && put compressed_sniff "$T/p.bz2" payload.bz2
cat "$T/p.gz" "$T/p.gz" >"$T/multi.gz" && put compressed_sniff "$T/multi.gz" multi.gz
printf 'hello' | xz -c --format=lzma >"$T/p.lzma" && put compressed_sniff "$T/p.lzma" payload.lzma
head -c 40 "$T/p.xz" >"$T/cut.xz" && put compressed_sniff "$T/cut.xz" cut.xz

for t in "$C"/*/; do printf '%-18s %5d files %8d bytes\n' "$(basename "$t")" \
    "$(find "$t" -type f | wc -l)" "$(cat "$t"/* | wc -c)"; done
