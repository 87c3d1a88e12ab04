#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| pith::harness::export_html(data));
