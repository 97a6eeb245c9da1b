//! The tree is byte for byte what `veritysetup format` writes (cryptsetup-bin), and
//! `veritysetup verify` accepts it, then refuses it after one flipped data byte.

use blockwise_test_kit::{have, run, tempdir, xorshift64star_bytes};
use blockwise_verity::{hex, Params, TreeBuilder};

fn uuid_text(u: &[u8; 16]) -> String {
    let h = hex(u);
    format!(
        "{}-{}-{}-{}-{}",
        &h[..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..]
    )
}

#[test]
fn same_bytes_as_veritysetup_format() {
    if !have("veritysetup") {
        return;
    }
    let dir = tempdir!();
    // Sizes around the level boundaries: one level, two, three, and zero blocks in between.
    for (i, blocks) in [2u64, 128, 129, 1280, 16385].into_iter().enumerate() {
        let mut data = xorshift64star_bytes(i as u64 + 1, (blocks * 4096) as usize);
        // A run of zero blocks, hashed through the cached digest.
        if blocks > 4 {
            data[4096..3 * 4096].fill(0);
        }
        let salt: Vec<u8> = (0..32).map(|b| b as u8 ^ 0x5a).collect();
        let uuid = [i as u8 + 1; 16];
        let params = Params::new(blocks, salt.clone(), uuid);
        let mut b = TreeBuilder::new(&params);
        for block in data.chunks(4096) {
            b.push_block(block).unwrap();
        }
        let tree = b.finish().unwrap();
        let dpath = dir.path().join(format!("data{i}"));
        let hpath = dir.path().join(format!("hash{i}"));
        std::fs::write(&dpath, &data).unwrap();
        std::fs::write(&hpath, b"").unwrap();
        let o = run(
            "veritysetup",
            &[
                "format".to_string(),
                format!("--salt={}", hex(&salt)),
                format!("--uuid={}", uuid_text(&uuid)),
                dpath.display().to_string(),
                hpath.display().to_string(),
            ],
        );
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let text = String::from_utf8_lossy(&o.stdout);
        let want_root = text
            .lines()
            .find_map(|l| l.strip_prefix("Root hash:"))
            .map(str::trim)
            .unwrap_or_default()
            .to_string();
        assert_eq!(hex(&tree.root), want_root, "{blocks} blocks: root hash");
        let theirs = std::fs::read(&hpath).unwrap();
        assert_eq!(theirs.len(), tree.bytes.len(), "{blocks} blocks: length");
        assert!(theirs == tree.bytes, "{blocks} blocks: hash area differs");
        // Ours verifies; one flipped data byte does not.
        std::fs::write(&hpath, &tree.bytes).unwrap();
        let verify = || {
            run(
                "veritysetup",
                &[
                    "verify".to_string(),
                    dpath.display().to_string(),
                    hpath.display().to_string(),
                    hex(&tree.root),
                ],
            )
        };
        assert!(verify().status.success(), "{blocks} blocks: verify");
        let mid = data.len() / 2;
        data[mid] ^= 1;
        std::fs::write(&dpath, &data).unwrap();
        assert!(
            !verify().status.success(),
            "{blocks} blocks: flipped byte passes"
        );
    }
}
