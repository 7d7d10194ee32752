//! Fuzz target: `imagegate::untrusted::controller_decision` must not panic on any input.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let _ = imagegate::untrusted::controller_decision(data);
});
