#![allow(missing_docs)] // criterion_group! generates undocumented functions
//! Planning is arithmetic: a 100-partition GPT plan takes microseconds to milliseconds.
//! `cargo bench --manifest-path benches/Cargo.toml --bench plan` prints the time per plan.

use blockwise_geometry::{plan, FsKind, ImageSpec, Layout, PartitionLayout, SizeSpec, TableKind};
use blockwise_image::Spec;
use criterion::{criterion_group, criterion_main, Criterion};

fn hundred_partition_gpt() -> Layout {
    let mut partitions: Vec<PartitionLayout> = (0..99)
        .map(|i| PartitionLayout::new(FsKind::None, SizeSpec::Bytes((i + 1) << 20)))
        .collect();
    partitions.push(PartitionLayout::new(FsKind::None, SizeSpec::Fill));
    Layout {
        image: ImageSpec {
            size: Some(64 << 30),
            table: TableKind::Gpt,
            ..ImageSpec::default()
        },
        partitions,
    }
}

fn bench(c: &mut Criterion) {
    let spec = hundred_partition_gpt();
    c.bench_function("plan 100-partition GPT", |b| {
        b.iter(|| plan(std::hint::black_box(&spec)).map(|p| p.size_bytes))
    });
    let text = (0..100).fold(
        String::from("[image]\ntable = \"gpt\"\nsize = \"64GiB\"\n"),
        |mut s, i| {
            s.push_str(&format!(
                "[[partition]]\nfs = \"none\"\nsize = \"{}MiB\"\n",
                i + 1
            ));
            s
        },
    );
    c.bench_function("parse + plan 100-partition GPT spec", |b| {
        b.iter(|| {
            Spec::from_toml(std::hint::black_box(&text))
                .map(|s| plan(&s.layout()).map(|p| p.size_bytes))
        })
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
