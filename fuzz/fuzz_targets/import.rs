//! Arbitrary bytes → `blockwise_import::import` as a genimage config and as a wic kickstart
//! (the first byte picks which), over a fake host whose includes return more of the input,
//! whose files all exist with sizes from the name, and whose directories have a usage from
//! the name: errors, never panics, never allocates by an unchecked number.
#![no_main]

use blockwise_import::{import, Format, Host, Options};
use libfuzzer_sys::fuzz_target;

struct Fake<'a> {
    text: &'a str,
}

fn weight(s: &str) -> u64 {
    s.bytes()
        .fold(7u64, |h, b| h.wrapping_mul(31).wrapping_add(u64::from(b)))
}

impl Host for Fake<'_> {
    fn include(&self, name: &str, _from: &str) -> Result<(String, String), String> {
        // Half of the includes fail; the rest read the input again (a self-include the
        // depth limit has to stop).
        if weight(name) % 2 == 0 {
            Err("no such file".into())
        } else {
            Ok((name.to_string(), self.text.to_string()))
        }
    }
    fn file_size(&self, path: &str) -> Option<u64> {
        let w = weight(path);
        (w % 5 != 0).then_some(w % (64 << 20))
    }
    fn dir_usage_kib(&self, path: &str, apparent: bool) -> Option<u64> {
        Some(weight(path) % (1 << 22) + u64::from(apparent))
    }
    fn env(&self, name: &str) -> Option<String> {
        (weight(name) % 3 == 0).then(|| "1M".to_string())
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&pick, rest)) = data.split_first() else {
        return;
    };
    let Ok(text) = std::str::from_utf8(rest) else {
        return;
    };
    let host = Fake { text };
    let format = if pick % 2 == 0 {
        Format::Genimage
    } else {
        Format::Wic
    };
    let options = Options {
        image: (pick & 4 != 0).then(|| "test.hdimage".to_string()),
        contents: vec![
            ("/".into(), "rootfs".into()),
            ("/boot".into(), "boot".into()),
        ],
        ..Options::default()
    };
    match import(format, "fuzz.cfg", text, &host, &options) {
        Ok(i) => {
            // What the importer prints must be a spec blockwise reads back.
            assert!(
                blockwise_image::Spec::from_toml(&i.toml).is_ok(),
                "{}",
                i.toml
            );
        }
        Err(e) => {
            let _ = e.to_string();
        }
    }
});
