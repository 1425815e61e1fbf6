//! Reading a photo's body: size limits before and while reading, the image signature from the
//! first bytes, and the MD5 (the [`ImageId`]) computed as the bytes arrive.

use bytes::{Bytes, BytesMut};
use md5::{Digest, Md5};

use super::DownloadError;
use crate::FetchErrorKind;
use imgest_core::budget::{BodyHold, Refusal};
use imgest_core::domain::{ImageId, SNIFF_LEN, SourceFormat};

/// The most a declared `Content-Length` makes us reserve up front: a server may declare the
/// limit and send far less, and many downloads run at once.
const MAX_RESERVE: u64 = 1 << 20;

/// A body that passed the checks.
pub(super) struct Body {
    pub bytes: Bytes,
    pub image_id: ImageId,
    pub format: SourceFormat,
}

/// Reads the body of a 2xx response.
///
/// With `memory`, the body's bytes are held in the process's budget before they are read: the
/// declared length at once, an undeclared body as it grows (doubling its hold, up to
/// `max_body`), waiting for room while the deadline allows.
///
/// Refuses a declared `Content-Length` over `max_body` without reading, stops as soon as the
/// bytes read exceed it, and refuses a body whose first bytes are not a JPEG, PNG, WebP, GIF
/// or AVIF signature as soon as it has them (the declared `Content-Type` is ignored: partners
/// mislabel real photos, and a label is no proof). An empty body is `unsupported_format`.
pub(super) async fn read(
    mut response: reqwest::Response,
    max_body: u64,
    mut memory: Option<&mut BodyHold>,
) -> Result<Body, DownloadError> {
    let declared = response.content_length();
    if let Some(declared) = declared.filter(|&len| len > max_body) {
        return Err(too_large(format!(
            "Content-Length is {declared} bytes, the limit is {max_body}"
        )));
    }
    if let (Some(hold), Some(declared)) = (memory.as_deref_mut(), declared) {
        hold.grow_to(declared).await.map_err(no_room)?;
    }
    let reserve = declared.unwrap_or(0).min(MAX_RESERVE);
    let mut buf = BytesMut::with_capacity(usize::try_from(reserve).unwrap_or(0));
    let mut md5 = Md5::new();
    let mut format = None;
    while let Some(chunk) = response
        .chunk()
        .await
        .map_err(DownloadError::from_reqwest)?
    {
        let total = u64::try_from(buf.len().saturating_add(chunk.len())).unwrap_or(u64::MAX);
        if total > max_body {
            return Err(too_large(format!(
                "the body passed the limit of {max_body} bytes"
            )));
        }
        if let Some(hold) = memory.as_deref_mut().filter(|h| total > h.bytes()) {
            let next = total.max(hold.bytes().saturating_mul(2)).min(max_body);
            hold.grow_to(next).await.map_err(no_room)?;
        }
        md5.update(&chunk);
        buf.extend_from_slice(&chunk);
        if format.is_none() && buf.len() >= SNIFF_LEN {
            format = Some(sniff(&buf)?);
        }
    }
    let format = match format {
        Some(format) => format,
        None => sniff(&buf)?,
    };
    Ok(Body {
        bytes: buf.freeze(),
        image_id: ImageId::from_md5(md5.finalize().into()),
        format,
    })
}

fn no_room(refusal: Refusal) -> DownloadError {
    DownloadError::no_room(format!("no memory for the body in this process: {refusal}"))
}

fn too_large(message: String) -> DownloadError {
    DownloadError::new(FetchErrorKind::TooLarge, message)
}

/// The image format of a body's first bytes: the formats the pipeline decodes, told by the
/// same table ([`SourceFormat::sniff`]) the pipeline sniffs with.
pub(super) fn sniff(first: &[u8]) -> Result<SourceFormat, DownloadError> {
    SourceFormat::sniff(first).map_err(|other| {
        DownloadError::new(
            FetchErrorKind::UnsupportedFormat,
            format!(
                "the body is {}, not a JPEG, PNG, WebP, GIF or AVIF image",
                other.describe()
            ),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_four_signatures_are_recognised_from_the_first_bytes() {
        assert_eq!(
            sniff(b"\xff\xd8\xff\xe0\0\x10JFIF").unwrap(),
            SourceFormat::Jpeg
        );
        assert_eq!(sniff(b"\x89PNG\r\n\x1a\n\0\0").unwrap(), SourceFormat::Png);
        assert_eq!(sniff(b"GIF89a\x01\0").unwrap(), SourceFormat::Gif);
        assert_eq!(
            sniff(b"RIFF\x24\0\0\0WEBPVP8 ").unwrap(),
            SourceFormat::Webp
        );
        for bad in [
            &b""[..],
            b"<!doctype html><html>",
            b"BM\x00\x00\x00\x00",
            b"II*\x00\x08\x00\x00\x00",
            b"\xff\xd8",
        ] {
            assert_eq!(
                sniff(bad).unwrap_err().kind,
                FetchErrorKind::UnsupportedFormat,
                "{bad:?}"
            );
        }
    }
}
