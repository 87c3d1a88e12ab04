//! Identifiers and timestamps for session files, without external crates.
//!
//! - Session ids are UUID v7 (48-bit Unix milliseconds, then random bits), like the reference's.
//! - Entry ids are 8 lowercase hex characters, re-drawn on collision (a full UUID after 100
//!   collisions), as in the reference.
//! - Timestamps are ISO 8601 UTC with milliseconds (`2026-11-21T22:24:44.839Z`), the output of
//!   JavaScript's `Date.toISOString()`.
//!
//! Randomness comes from `/dev/urandom`; if that cannot be read, a time-seeded SplitMix64
//! generator (mixed with a process-wide counter) keeps ids unique enough for one process.

use std::io::Read;
use std::sync::atomic::{AtomicU64, Ordering};

/// Fill `buf` with random bytes: the kernel's `getrandom(2)` (one system call; opening
/// `/dev/urandom` took three, for each of the ids a start-up draws), else `/dev/urandom`, else a
/// time-based fallback.
pub fn random_bytes(buf: &mut [u8]) {
    if os_random(buf) {
        return;
    }
    let ok = std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(buf))
        .is_ok();
    if !ok {
        fallback_bytes(buf);
    }
}

/// `getrandom(2)` through the C library (glibc ≥ 2.25, musl ≥ 1.1.20); `false` if it is not
/// there (an old kernel) or fails.
#[cfg(target_os = "linux")]
fn os_random(buf: &mut [u8]) -> bool {
    unsafe extern "C" {
        fn getrandom(buf: *mut u8, len: usize, flags: u32) -> isize;
    }
    const GRND_NONBLOCK: u32 = 1;
    let mut filled = 0;
    while filled < buf.len() {
        let rest = &mut buf[filled..];
        // SAFETY: the pointer and length describe `rest`, writable for the call.
        let n = unsafe { getrandom(rest.as_mut_ptr(), rest.len(), GRND_NONBLOCK) };
        if n <= 0 {
            // Not there (ENOSYS), or the pool is not initialised yet this early after boot
            // (EAGAIN: the device does not wait for it, so neither do ids).
            return false;
        }
        filled += n as usize;
    }
    true
}

#[cfg(not(target_os = "linux"))]
fn os_random(_buf: &mut [u8]) -> bool {
    false
}

fn fallback_bytes(buf: &mut [u8]) {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    let mut state = nanos
        ^ (u64::from(std::process::id()) << 32)
        ^ COUNTER.fetch_add(0x9E37_79B9_7F4A_7C15, Ordering::Relaxed);
    for chunk in buf.chunks_mut(8) {
        state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        chunk.copy_from_slice(&z.to_le_bytes()[..chunk.len()]);
    }
}

/// `bytes` as lowercase hex.
pub(crate) fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        s.push(DIGITS[usize::from(b >> 4)] as char);
        s.push(DIGITS[usize::from(b & 0xf)] as char);
    }
    s
}

/// A UUID v7 string for the given Unix time in milliseconds.
pub fn uuid_v7_at(ms: u64) -> String {
    let mut b = [0u8; 16];
    random_bytes(&mut b[6..]);
    b[..6].copy_from_slice(&ms.to_be_bytes()[2..]);
    b[6] = 0x70 | (b[6] & 0x0f);
    b[8] = 0x80 | (b[8] & 0x3f);
    let h = hex(&b);
    format!(
        "{}-{}-{}-{}-{}",
        &h[0..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..32]
    )
}

/// A UUID v7 string for now.
pub fn uuid_v7() -> String {
    uuid_v7_at(crate::message::now_ms())
}

/// A fresh 8-hex entry id that `taken` does not know (a full UUID after 100 collisions).
pub fn short_id(taken: impl Fn(&str) -> bool) -> String {
    for _ in 0..100 {
        let mut b = [0u8; 4];
        random_bytes(&mut b);
        let id = hex(&b);
        if !taken(&id) {
            return id;
        }
    }
    uuid_v7()
}

/// `Date.toISOString()` of a Unix time in milliseconds: `YYYY-MM-DDTHH:MM:SS.mmmZ`.
pub fn iso_timestamp(ms: u64) -> String {
    let secs = ms / 1000;
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{:03}Z",
        rem / 3600,
        (rem / 60) % 60,
        rem % 60,
        ms % 1000
    )
}

/// The ISO timestamp of now.
pub fn now_iso() -> String {
    iso_timestamp(crate::message::now_ms())
}

/// Parse an ISO 8601 UTC timestamp (`YYYY-MM-DDTHH:MM:SS[.fff]Z`) to Unix milliseconds.
/// Returns `None` for anything else (including times before 1970).
pub fn parse_iso_ms(s: &str) -> Option<u64> {
    let b = s.as_bytes();
    if b.len() < 20 || b[4] != b'-' || b[7] != b'-' || b[10] != b'T' || b[13] != b':' {
        return None;
    }
    let num = |r: std::ops::Range<usize>| -> Option<u64> {
        // Digits only (no sign), at most four: summed by hand, `str::parse` is dearer.
        b[r].iter().try_fold(0u64, |v, &c| {
            c.is_ascii_digit().then(|| v * 10 + u64::from(c - b'0'))
        })
    };
    let (y, mo, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (h, mi, sec) = (num(11..13)?, num(14..16)?, num(17..19)?);
    if b[16] != b':' || !(1..=12).contains(&mo) || !(1..=31).contains(&d) || h > 23 || mi > 59 {
        return None;
    }
    let rest = &s[19..];
    let millis = match rest.strip_prefix('.') {
        Some(frac) => {
            // Milliseconds from the first three digits (fewer are padded: `.5` is 500 ms),
            // further digits ignored; the fraction must end with `Z`. No allocation: every
            // entry of a session file goes through here when it is loaded.
            let digits = frac.bytes().take_while(u8::is_ascii_digit).count();
            if digits == 0 || &frac[digits..] != "Z" {
                return None;
            }
            let mut ms = 0u64;
            for i in 0..3 {
                let digit = frac
                    .as_bytes()
                    .get(i)
                    .filter(|_| i < digits)
                    .map_or(0, |c| c - b'0');
                ms = ms * 10 + u64::from(digit);
            }
            ms
        }
        None if rest == "Z" => 0,
        None => return None,
    };
    let days = days_from_civil(y as i64, mo as u32, d as u32);
    if days < 0 {
        return None;
    }
    Some(((days as u64 * 86_400) + h * 3600 + mi * 60 + sec) * 1000 + millis)
}

// Howard Hinnant's civil calendar algorithms (proleptic Gregorian).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let m = i64::from(m);
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + i64::from(d) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn iso_round_trip_matches_reference_sample() {
        // From the oracle's m_session header: id 01a20036-3f26-… was minted at …44.838/839Z.
        let ms = parse_iso_ms("2026-11-21T22:24:44.839Z").unwrap();
        assert_eq!(ms, 1_795_299_884_839);
        assert_eq!(iso_timestamp(ms), "2026-11-21T22:24:44.839Z");
        assert_eq!(iso_timestamp(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(
            parse_iso_ms("2024-02-29T00:00:00Z"),
            Some(1_709_164_800_000)
        );
        assert_eq!(
            parse_iso_ms("2024-02-29T00:00:00.5Z"),
            Some(1_709_164_800_500)
        );
        assert_eq!(parse_iso_ms("garbage"), None);
        assert_eq!(parse_iso_ms("2024-02-29T00:00:00.123+01:00"), None);
    }

    #[test]
    fn uuid_v7_layout() {
        let u = uuid_v7_at(0x01a2_0036_3f26);
        assert_eq!(u.len(), 36);
        assert!(u.starts_with("01a20036-3f26-7"), "{u}");
        assert!(matches!(&u[19..20], "8" | "9" | "a" | "b"), "{u}");
        assert_ne!(uuid_v7(), uuid_v7());
    }

    #[test]
    fn short_ids_are_hex_and_avoid_taken() {
        let id = short_id(|_| false);
        assert_eq!(id.len(), 8);
        assert!(
            id.bytes()
                .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase())
        );
        assert_eq!(short_id(|_| true).len(), 36);
        let mut b = [0u8; 13];
        fallback_bytes(&mut b);
        let mut c = [0u8; 13];
        fallback_bytes(&mut c);
        assert_ne!(b, c);
    }
}
