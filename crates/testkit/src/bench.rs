//! Helpers of the `harness = false` benchmarks that need more than `cargo bench` gives them (a
//! running server, real control planes): their arguments, their numeric settings, and what
//! they say when run without being asked to.

#![allow(clippy::panic, reason = "a benchmark with a bad setting fails loudly")]

/// The benchmark's own arguments: those after `--` of `cargo bench -p P --bench B -- ...`,
/// without the `--bench` that `cargo bench` adds.
pub fn args() -> Vec<String> {
    std::env::args()
        .skip(1)
        .filter(|a| a != "--bench")
        .collect()
}

/// `None` when the benchmark was started without arguments (a plain `cargo bench`, or
/// `cargo test --benches`), after saying how to run it: it needs `what` first.
pub fn args_or_usage(name: &str, what: &str, usage: &str) -> Option<Vec<String>> {
    let args = args();
    if args.is_empty() {
        println!("{name}: not run: it needs {what}; run it as {usage}");
        return None;
    }
    Some(args)
}

/// The environment variable `name` as a number, `default` when unset; panics on a bad value.
pub fn env_number(name: &str, default: usize) -> usize {
    match std::env::var(name) {
        Ok(value) => value
            .parse()
            .unwrap_or_else(|_| panic!("{name}={value} is not a number")),
        Err(_) => default,
    }
}

/// A pause of 0-1 s after change `change` that does not line up with anything periodic (the
/// API server's one-second policy reload).
pub fn jitter(change: usize) -> std::time::Duration {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let mixed = (u64::from(nanos) ^ (change as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15))
        .wrapping_mul(0x2545_f491_4f6c_dd1d);
    std::time::Duration::from_millis((mixed >> 32) % 1000)
}
