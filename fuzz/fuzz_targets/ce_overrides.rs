//! Fuzz target: `imagegate::untrusted::ce_overrides` must not panic on any input.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let _ = imagegate::untrusted::ce_overrides(data);
});
