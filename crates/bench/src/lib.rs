//! Dev-only: palisade's benchmarks (`benches/`), kept out of the crates they measure so that
//! those crates' builds and dependency lists carry no benchmark. Nothing here: each benchmark
//! is its own target, `cargo bench -p palisade-bench --bench NAME`; docs/benchmarks.md has
//! their commands and figures.
