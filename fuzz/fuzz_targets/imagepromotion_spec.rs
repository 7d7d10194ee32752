//! Fuzz target: `imagegate::untrusted::imagepromotion_spec` must not panic on any input.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let _ = imagegate::untrusted::imagepromotion_spec(data);
});
