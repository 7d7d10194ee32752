//! Fuzz target: `imagegate::untrusted::retry_after` must not panic on any input.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let _ = imagegate::untrusted::retry_after(data);
});
