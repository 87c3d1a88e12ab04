//! BMP images for the `read` tool under `--compat 0.87`: pi 0.87.1 recognises a BMP by its
//! header ([`is_bmp`], the checks of its `mime.ts`) and sends it to the model converted to PNG.
//! [`to_png`] decodes the common layouts (1/4/8-bit palettes, 16/24/32-bit pixels, `BI_RGB` and
//! `BI_BITFIELDS`, bottom-up or top-down rows) into RGBA and writes an RGBA PNG, as pi's
//! converter (photon) does. The PNG's pixel data is stored uncompressed (deflate "stored"
//! blocks), so for images beyond a few pixels its bytes differ from pi's compressed PNG; the
//! pixels are the same. Pure code, no I/O; malformed input gives `None`, never a panic.

/// pi 0.87.1's BMP check on the first bytes of a file: `BM`, a plausible file size, pixel
/// offset and DIB header, one colour plane and a known bit depth.
pub fn is_bmp(b: &[u8]) -> bool {
    if b.len() < 26 || !b.starts_with(b"BM") {
        return false;
    }
    let declared_size = u32le(b, 2);
    let pixel_offset = u32le(b, 10) as u64;
    let dib = u32le(b, 14);
    if declared_size != 0 && declared_size < 26 {
        return false;
    }
    if pixel_offset < 14 + dib as u64 {
        return false;
    }
    if declared_size != 0 && pixel_offset >= declared_size as u64 {
        return false;
    }
    let (planes, bpp) = if dib == 12 {
        (u16le(b, 22), u16le(b, 24))
    } else if (40..=124).contains(&dib) {
        if b.len() < 30 {
            return false;
        }
        (u16le(b, 26), u16le(b, 28))
    } else {
        return false;
    };
    planes == 1 && [1, 4, 8, 16, 24, 32].contains(&bpp)
}

/// The largest image converted (4096 x 4096 pixels): bounds the memory one file can take (pi
/// would shrink such an image before sending it; pith does not resize).
const MAX_PIXELS: u64 = 4096 * 4096;

/// The BMP as an RGBA PNG, or `None` when it cannot be decoded (compressed RLE data, a
/// truncated file, absurd dimensions).
pub fn to_png(b: &[u8]) -> Option<Vec<u8>> {
    let (w, h, rgba) = decode(b)?;
    Some(encode_png(w, h, &rgba))
}

fn u16le(b: &[u8], at: usize) -> u16 {
    match b.get(at..at + 2) {
        Some(s) => u16::from_le_bytes([s[0], s[1]]),
        None => 0,
    }
}

fn u32le(b: &[u8], at: usize) -> u32 {
    match b.get(at..at + 4) {
        Some(s) => u32::from_le_bytes([s[0], s[1], s[2], s[3]]),
        None => 0,
    }
}

/// One colour channel of a `BI_BITFIELDS` mask, scaled to 8 bits.
#[derive(Clone, Copy)]
struct Field {
    shift: u32,
    bits: u32,
}

impl Field {
    fn of(mask: u32) -> Option<Field> {
        if mask == 0 {
            return None;
        }
        let shift = mask.trailing_zeros();
        let bits = (mask >> shift).trailing_ones();
        Some(Field { shift, bits })
    }

    fn read(self, px: u32) -> u8 {
        let max = if self.bits >= 32 {
            u32::MAX
        } else {
            (1u32 << self.bits) - 1
        };
        let v = (px >> self.shift) & max;
        if self.bits > 8 {
            (v >> (self.bits - 8)) as u8
        } else {
            ((v as u64 * 255 + max as u64 / 2) / max as u64) as u8
        }
    }
}

/// `(width, height, RGBA rows top-down)`.
fn decode(b: &[u8]) -> Option<(u32, u32, Vec<u8>)> {
    if !is_bmp(b) {
        return None;
    }
    let pixel_offset = u32le(b, 10) as usize;
    let dib = u32le(b, 14) as usize;
    let (width, height, bpp, compression, colors_used) = if dib == 12 {
        (
            u16le(b, 18) as i64,
            u16le(b, 20) as i16 as i64,
            u16le(b, 24),
            0,
            0,
        )
    } else {
        (
            u32le(b, 18) as i32 as i64,
            u32le(b, 22) as i32 as i64,
            u16le(b, 28),
            u32le(b, 30),
            u32le(b, 46),
        )
    };
    let top_down = height < 0;
    let (w, h) = (width, height.unsigned_abs() as i64);
    if w <= 0 || h <= 0 || (w as u64) * (h as u64) > MAX_PIXELS {
        return None;
    }
    let (w, h) = (w as usize, h as usize);
    // Masks: in the header from V2 on, else right after a 40-byte header.
    let masks =
        |count: usize| -> Vec<u32> { (0..count).map(|i| u32le(b, 14 + 40 + 4 * i)).collect() };
    let fields: Option<[Option<Field>; 4]> = match (bpp, compression) {
        (16, 0) => Some([
            Field::of(0x7C00),
            Field::of(0x03E0),
            Field::of(0x001F),
            None,
        ]),
        (32, 0) => Some([
            Field::of(0x00FF_0000),
            Field::of(0x0000_FF00),
            Field::of(0x0000_00FF),
            None,
        ]),
        (16 | 32, 3 | 6) => {
            let with_alpha = compression == 6 || dib >= 56;
            let m = masks(if with_alpha { 4 } else { 3 });
            Some([
                Field::of(m[0]),
                Field::of(m[1]),
                Field::of(m[2]),
                m.get(3).and_then(|a| Field::of(*a)),
            ])
        }
        (24, 0) | (1 | 4 | 8, 0) => None,
        _ => return None, // RLE, JPEG/PNG inside a BMP, or a depth that does not fit
    };
    // The palette follows the header (and the masks of a 40-byte BITFIELDS header).
    let palette: Vec<[u8; 4]> = if bpp <= 8 {
        let entry = if dib == 12 { 3 } else { 4 };
        let start = 14 + dib + if dib == 40 && compression == 3 { 12 } else { 0 };
        let max = 1usize << bpp;
        let count = if colors_used == 0 || colors_used as usize > max {
            max
        } else {
            colors_used as usize
        };
        (0..count)
            .map(|i| {
                let at = start + i * entry;
                match b.get(at..at + 3) {
                    Some(c) => [c[2], c[1], c[0], 255],
                    None => [0, 0, 0, 255],
                }
            })
            .collect()
    } else {
        Vec::new()
    };
    let stride = (w * bpp as usize).div_ceil(32) * 4;
    let data = b.get(pixel_offset..)?;
    if data.len() < stride * (h - 1) + (w * bpp as usize).div_ceil(8) {
        return None;
    }
    let mut out = vec![0u8; w * h * 4];
    for y in 0..h {
        let src_row = if top_down { y } else { h - 1 - y };
        let row = &data[src_row * stride..];
        let dst = &mut out[y * w * 4..(y + 1) * w * 4];
        for x in 0..w {
            let px: [u8; 4] = match bpp {
                1 | 4 | 8 => {
                    let bits = bpp as usize;
                    let bit = x * bits;
                    let byte = row[bit / 8];
                    let idx = (byte >> (8 - bits - bit % 8)) & ((1u16 << bits) - 1) as u8;
                    palette.get(idx as usize).copied().unwrap_or([0, 0, 0, 255])
                }
                24 => [row[x * 3 + 2], row[x * 3 + 1], row[x * 3], 255],
                16 | 32 => {
                    let v = if bpp == 16 {
                        u16le(row, x * 2) as u32
                    } else {
                        u32le(row, x * 4)
                    };
                    let f = fields.unwrap_or([None; 4]);
                    let ch = |i: usize| f[i].map_or(0, |f| f.read(v));
                    [ch(0), ch(1), ch(2), f[3].map_or(255, |a| a.read(v))]
                }
                _ => return None,
            };
            dst[x * 4..x * 4 + 4].copy_from_slice(&px);
        }
    }
    Some((w as u32, h as u32, out))
}

/// An 8-bit RGBA PNG of `rgba` (rows top-down), filter type None, deflate stored blocks.
fn encode_png(w: u32, h: u32, rgba: &[u8]) -> Vec<u8> {
    let row = w as usize * 4;
    let mut raw = Vec::with_capacity((row + 1) * h as usize);
    for r in rgba.chunks(row) {
        raw.push(0);
        raw.extend_from_slice(r);
    }
    let mut z = vec![0x78, 0x01];
    let mut blocks = raw.chunks(0xFFFF).peekable();
    if blocks.peek().is_none() {
        z.extend_from_slice(&[1, 0, 0, 0xFF, 0xFF]);
    }
    while let Some(block) = blocks.next() {
        let last = blocks.peek().is_none();
        let len = block.len() as u16;
        z.push(u8::from(last));
        z.extend_from_slice(&len.to_le_bytes());
        z.extend_from_slice(&(!len).to_le_bytes());
        z.extend_from_slice(block);
    }
    z.extend_from_slice(&adler32(&raw).to_be_bytes());

    let mut png = vec![0x89, b'P', b'N', b'G', 0x0D, 0x0A, 0x1A, 0x0A];
    let mut ihdr = Vec::with_capacity(13);
    ihdr.extend_from_slice(&w.to_be_bytes());
    ihdr.extend_from_slice(&h.to_be_bytes());
    ihdr.extend_from_slice(&[8, 6, 0, 0, 0]);
    chunk(&mut png, b"IHDR", &ihdr);
    chunk(&mut png, b"IDAT", &z);
    chunk(&mut png, b"IEND", &[]);
    png
}

fn chunk(png: &mut Vec<u8>, kind: &[u8; 4], data: &[u8]) {
    png.extend_from_slice(&(data.len() as u32).to_be_bytes());
    let start = png.len();
    png.extend_from_slice(kind);
    png.extend_from_slice(data);
    let crc = crc32(&png[start..]);
    png.extend_from_slice(&crc.to_be_bytes());
}

fn crc32(data: &[u8]) -> u32 {
    let mut crc = 0xFFFF_FFFFu32;
    for &byte in data {
        crc ^= byte as u32;
        for _ in 0..8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ 0xEDB8_8320
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

fn adler32(data: &[u8]) -> u32 {
    let (mut a, mut b) = (1u32, 0u32);
    for chunk in data.chunks(5552) {
        for &x in chunk {
            a += x as u32;
            b += a;
        }
        a %= 65521;
        b %= 65521;
    }
    (b << 16) | a
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A 24-bit bottom-up BMP of `rows` (top row first, RGB pixels).
    fn bmp24(rows: &[Vec<[u8; 3]>]) -> Vec<u8> {
        let (w, h) = (rows[0].len(), rows.len());
        let mut pix = Vec::new();
        for r in rows.iter().rev() {
            let mut line: Vec<u8> = r.iter().flat_map(|p| [p[2], p[1], p[0]]).collect();
            while !line.len().is_multiple_of(4) {
                line.push(0);
            }
            pix.extend(line);
        }
        let mut b = b"BM".to_vec();
        b.extend_from_slice(&(54 + pix.len() as u32).to_le_bytes());
        b.extend_from_slice(&[0, 0, 0, 0]);
        b.extend_from_slice(&54u32.to_le_bytes());
        b.extend_from_slice(&40u32.to_le_bytes());
        b.extend_from_slice(&(w as i32).to_le_bytes());
        b.extend_from_slice(&(h as i32).to_le_bytes());
        b.extend_from_slice(&1u16.to_le_bytes());
        b.extend_from_slice(&24u16.to_le_bytes());
        b.extend_from_slice(&[0; 24]);
        b.extend(pix);
        b
    }

    #[test]
    fn a_small_bmp_converts_to_the_png_pi_sends() {
        // pi 0.87.1's PNG for this 2x2 BMP (red, green / blue, white), as recorded.
        let bmp = bmp24(&[
            vec![[255, 0, 0], [0, 255, 0]],
            vec![[0, 0, 255], [255, 255, 255]],
        ]);
        assert!(is_bmp(&bmp));
        let png = to_png(&bmp).unwrap();
        let hex: String = png.iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(
            hex,
            "89504e470d0a1a0a0000000d494844520000000200000002080600000072b60d240000001d494441547801011200edff00ff0000ff00ff00ff000000ffffffffffff49c809f7adab561b0000000049454e44ae426082"
        );
    }

    #[test]
    fn palettes_bitfields_and_top_down_rows() {
        // 1-bit, 2x1, palette black/white, pixels 1,0.
        let mut b = b"BM".to_vec();
        b.extend_from_slice(&66u32.to_le_bytes());
        b.extend_from_slice(&[0; 4]);
        b.extend_from_slice(&62u32.to_le_bytes());
        b.extend_from_slice(&40u32.to_le_bytes());
        b.extend_from_slice(&2i32.to_le_bytes());
        b.extend_from_slice(&(-1i32).to_le_bytes());
        b.extend_from_slice(&1u16.to_le_bytes());
        b.extend_from_slice(&1u16.to_le_bytes());
        b.extend_from_slice(&[0; 24]);
        b.extend_from_slice(&[0, 0, 0, 0, 255, 255, 255, 0]);
        b.extend_from_slice(&[0b1000_0000, 0, 0, 0]);
        let (w, h, rgba) = decode(&b).unwrap();
        assert_eq!((w, h), (2, 1));
        assert_eq!(rgba, [255, 255, 255, 255, 0, 0, 0, 255]);
        // 16-bit 5-6-5 BITFIELDS, one pixel of pure green.
        let mut b = b"BM".to_vec();
        b.extend_from_slice(&70u32.to_le_bytes());
        b.extend_from_slice(&[0; 4]);
        b.extend_from_slice(&66u32.to_le_bytes());
        b.extend_from_slice(&40u32.to_le_bytes());
        b.extend_from_slice(&1i32.to_le_bytes());
        b.extend_from_slice(&1i32.to_le_bytes());
        b.extend_from_slice(&1u16.to_le_bytes());
        b.extend_from_slice(&16u16.to_le_bytes());
        b.extend_from_slice(&3u32.to_le_bytes());
        b.extend_from_slice(&[0; 20]);
        for m in [0xF800u32, 0x07E0, 0x001F] {
            b.extend_from_slice(&m.to_le_bytes());
        }
        b.extend_from_slice(&[0xE0, 0x07, 0, 0]);
        let (_, _, rgba) = decode(&b).unwrap();
        assert_eq!(rgba, [0, 255, 0, 255]);
    }

    #[test]
    fn malformed_bmps_are_refused_without_panicking() {
        let good = bmp24(&vec![vec![[1, 2, 3]; 3]; 3]);
        for cut in 0..good.len() {
            let _ = to_png(&good[..cut]);
        }
        let mut rle = good.clone();
        rle[30] = 1; // BI_RLE8
        assert!(to_png(&rle).is_none());
        let mut huge = good.clone();
        huge[18..22].copy_from_slice(&i32::MAX.to_le_bytes());
        assert!(to_png(&huge).is_none());
        assert!(!is_bmp(b"BM"));
        assert!(!is_bmp(b"hello world, this is not an image at all"));
    }
}
