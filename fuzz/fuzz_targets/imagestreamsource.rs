//! Fuzz target: `imagegate::untrusted::imagestreamsource` must not panic on any input.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let _ = imagegate::untrusted::imagestreamsource(data);
});
