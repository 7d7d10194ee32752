//! Fuzz target: `imagegate::untrusted::recorded_target` must not panic on any input.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let _ = imagegate::untrusted::recorded_target(data);
});
