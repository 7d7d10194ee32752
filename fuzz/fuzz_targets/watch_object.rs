//! Fuzz target: `imagegate::untrusted::watch_object` must not panic on any input.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let _ = imagegate::untrusted::watch_object(data);
});
