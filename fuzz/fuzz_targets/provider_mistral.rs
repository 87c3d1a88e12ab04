#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| pith::harness::provider_stream("mistral-conversations", data));
