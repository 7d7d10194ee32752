//! Fuzz target: `imagegate::untrusted::checkpoint_shards` must not panic on any input.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let _ = imagegate::untrusted::checkpoint_shards(data);
});
