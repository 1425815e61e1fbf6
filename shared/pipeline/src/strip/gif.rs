//! A GIF's stored original: its blocks walked, comments and application extensions dropped
//! (XMP travels in one) except the animation loop's (`NETSCAPE2.0`, `ANIMEXTS1.0`), and
//! whatever follows the trailer or a byte that starts no block (where decoders stop reading).

use super::super::PipelineError;

fn corrupt(why: &str) -> PipelineError {
    PipelineError::CorruptImage(format!("GIF: {why}"))
}

/// The header and the logical screen descriptor.
const SCREEN_END: usize = 13;

/// The application extensions kept: how an animation loops.
const LOOPS: [&[u8]; 2] = [b"NETSCAPE2.0", b"ANIMEXTS1.0"];

pub(crate) fn strip(bytes: &[u8]) -> Result<Vec<u8>, PipelineError> {
    let short = || corrupt("cut short");
    let flags = *bytes.get(10).ok_or_else(short)?;
    let mut at = SCREEN_END + table_len(flags);
    let mut out = Vec::with_capacity(bytes.len());
    out.extend_from_slice(bytes.get(..at).ok_or_else(short)?);
    loop {
        match *bytes.get(at).ok_or_else(short)? {
            b';' => {
                out.push(b';');
                return Ok(out);
            }
            b'!' => {
                let label = *bytes.get(at + 1).ok_or_else(short)?;
                let end = sub_blocks_end(bytes, at + 2)?;
                let keep = match label {
                    0xFE => false,
                    0xFF => {
                        let id = bytes.get(at + 3..at + 14).unwrap_or_default();
                        bytes.get(at + 2) == Some(&11) && LOOPS.contains(&id)
                    }
                    _ => true,
                };
                if keep {
                    out.extend_from_slice(&bytes[at..end]);
                }
                at = end;
            }
            b',' => {
                let flags = *bytes.get(at + 9).ok_or_else(short)?;
                // The descriptor, its local table, the LZW code size, then the data.
                let data = at + 10 + table_len(flags) + 1;
                let end = sub_blocks_end(bytes, data)?;
                out.extend_from_slice(&bytes[at..end]);
                at = end;
            }
            // What decoders meet here ends the stream for them (a file another was appended
            // to, say): the original ends here too, so nothing unread is stored.
            _ => {
                out.push(b';');
                return Ok(out);
            }
        }
    }
}

/// The size of the colour table a flags byte announces (global or local: same bits).
fn table_len(flags: u8) -> usize {
    if flags & 0x80 == 0 {
        0
    } else {
        3 << ((flags & 0x07) + 1)
    }
}

/// Where the sub-blocks starting at `at` end (after their zero-length terminator).
fn sub_blocks_end(bytes: &[u8], mut at: usize) -> Result<usize, PipelineError> {
    loop {
        let len = usize::from(*bytes.get(at).ok_or_else(|| corrupt("cut short"))?);
        at += 1 + len;
        if len == 0 {
            return if at <= bytes.len() {
                Ok(at)
            } else {
                Err(corrupt("cut short"))
            };
        }
    }
}
