#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| pith::harness::config_files(data));
